// `kvrank diff`'s result (diff_report.hpp): pairing two sides, the heads that moved most, and the
// JSON, CSV/TSV and table writers.
#include "kvrank/report/diff_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/base/version.hpp"

namespace kvrank {

using nlohmann::json;

namespace {

/// "qk", or "qk [decoder cross]" for a series of an encoder-decoder.
std::string series_name(const ModelReport& model) {
  return model.attention ? model.repr + " [" + series_text(*model.attention) + "]" : model.repr;
}

bool same_series(const ModelReport& a, const ModelReport& b) {
  return a.repr == b.repr && a.attention == b.attention;
}

std::vector<int> layer_numbers(const ModelReport& model) {
  std::vector<int> numbers;
  for (const LayerMetrics& layer : model.layers) numbers.push_back(layer.layer);
  return numbers;
}

/// The one model of `side` in `model`'s series; an error when there are several, nullptr for none.
const ModelReport* match_in(const std::vector<ModelReport>& side, const ModelReport& model,
                            const std::string& side_name) {
  const ModelReport* found = nullptr;
  for (const ModelReport& candidate : side) {
    if (is_baseline(candidate) || !same_series(candidate, model)) continue;
    if (found)
      throw Error(side_name, "holds several models of " + series_name(model) + " (\"" +
                                 printable(found->label) + "\", \"" + printable(candidate.label) +
                                 "\"): diff compares one model with one");
    found = &candidate;
  }
  return found;
}

/// NaN for a missing value: a zero head has no similarity.
double nan_value() { return std::numeric_limits<double>::quiet_NaN(); }

}  // namespace

void check_same_geometry(const ModelReport& a, const ModelReport& b) {
  for (const GeometryField& field : geometry_fields()) {
    const int left = a.geometry.*field.value;
    const int right = b.geometry.*field.value;
    if (left != right)
      throw Error("", "the models differ in geometry: " + std::string(field.name) + " " +
                          std::to_string(left) + " vs " + std::to_string(right) +
                          " (diff compares models of one shape)");
  }
  if (a.attention_layers != b.attention_layers)
    throw Error("",
                "the models differ in geometry: their attention layers differ (diff compares "
                "models of one shape)");
}

std::vector<SeriesDiff> pair_reports(std::vector<ModelReport> a, std::vector<ModelReport> b,
                                     const std::string& a_name, const std::string& b_name) {
  std::vector<SeriesDiff> pairs;
  for (const ModelReport& model : a) {
    if (is_baseline(model) || match_in(a, model, a_name) != &model) continue;
    const ModelReport* other = match_in(b, model, b_name);
    if (!other)
      throw Error(b_name, "has no model of " + series_name(model) + " (" + a_name +
                              " has): diff compares the same representation");
    check_same_geometry(model, *other);
    if (layer_numbers(model) != layer_numbers(*other))
      throw Error("", "the two sides hold different layers of " + series_name(model) +
                          " (diff compares layer with layer: give both the same --layers)");
    pairs.push_back({model, *other, {}});
  }
  for (const ModelReport& model : b)
    if (!is_baseline(model) && !match_in(a, model, a_name))
      throw Error(a_name, "has no model of " + series_name(model) + " (" + b_name +
                              " has): diff compares the same representation");
  if (pairs.empty()) throw Error(a_name, "holds no model to compare");
  return pairs;
}

std::vector<MovedHead> heads_by_movement(const DiffResult& diff) {
  std::vector<MovedHead> heads;
  for (std::size_t s = 0; s < diff.series.size(); ++s) {
    const SeriesDiff& series = diff.series[s];
    for (std::size_t i = 0; i < series.head_similarity.size(); ++i) {
      const std::vector<double>& similarity = series.head_similarity[i];
      for (std::size_t h = 0; h < similarity.size(); ++h)
        if (!std::isnan(similarity[h]))
          heads.push_back({s, series.a.layers[i].layer, static_cast<int>(h), similarity[h]});
    }
  }
  std::stable_sort(heads.begin(), heads.end(), [](const MovedHead& x, const MovedHead& y) {
    return x.similarity < y.similarity;
  });
  return heads;
}

// ----------------------------------------------------------------------------------------------
// Head similarity of one layer: the lowest and the mean over the non-zero heads.
// ----------------------------------------------------------------------------------------------
namespace {

struct HeadSpread {
  double lowest = nan_value();
  int lowest_head = -1;
  double mean = nan_value();
};

HeadSpread spread(const std::vector<double>& similarity) {
  HeadSpread out;
  double sum = 0;
  int count = 0;
  for (std::size_t h = 0; h < similarity.size(); ++h) {
    const double value = similarity[h];
    if (std::isnan(value)) continue;
    sum += value;
    ++count;
    if (out.lowest_head < 0 || value < out.lowest) {
      out.lowest = value;
      out.lowest_head = static_cast<int>(h);
    }
  }
  if (count) out.mean = sum / count;
  return out;
}

json number_or_null(double value) { return std::isnan(value) ? json(nullptr) : json(value); }

// ----------------------------------------------------------------------------------------------
// JSON
// ----------------------------------------------------------------------------------------------

json side_to_json(const ModelReport& model) {
  return {{"label", model.label},
          {"path", model.path},
          {"step", model.step ? json(*model.step) : json(nullptr)},
          {"family", model.family},
          {"model_type", model.model_type.empty() ? json(nullptr) : json(model.model_type)},
          {"variant", model.variant}};
}

/// Each metric of `a`, `b` or their change (b − a), by its result-file name.
template <typename Value>
json metrics_to_json(Value value) {
  json out = json::object();
  for (const CurveField& field : metric_fields()) {
    const double number = value(field);
    out[std::string(field.name)] = field.integral ? json(std::lround(number)) : json(number);
  }
  return out;
}

json layer_to_json(const SeriesDiff& series, std::size_t i) {
  const LayerMetrics& a = series.a.layers[i];
  const LayerMetrics& b = series.b.layers[i];
  json out = {
      {"layer", a.layer},
      {"a", metrics_to_json([&](const CurveField& f) { return f.value(a); })},
      {"b", metrics_to_json([&](const CurveField& f) { return f.value(b); })},
      {"change", metrics_to_json([&](const CurveField& f) { return f.value(b) - f.value(a); })},
  };
  if (series.head_similarity.empty()) return out;
  json heads = json::array();
  for (double value : series.head_similarity[i]) heads.push_back(number_or_null(value));
  const HeadSpread s = spread(series.head_similarity[i]);
  out["head_similarity"] = std::move(heads);
  out["min_head_similarity"] = number_or_null(s.lowest);
  out["mean_head_similarity"] = number_or_null(s.mean);
  return out;
}

json attention_to_json(const AttentionSeries& series) {
  return {{"stack", stack_name(series.stack)}, {"kind", kind_name(series.kind)}};
}

json series_to_json(const SeriesDiff& series) {
  json layers = json::array();
  for (std::size_t i = 0; i < series.a.layers.size(); ++i)
    layers.push_back(layer_to_json(series, i));
  json out = {{"repr", series.a.repr},
              {"a", side_to_json(series.a)},
              {"b", side_to_json(series.b)},
              {"layers", std::move(layers)}};
  for (const GeometryField& field : geometry_fields())
    out[std::string(field.name)] = series.a.geometry.*field.value;
  if (series.a.attention) out["attention"] = attention_to_json(*series.a.attention);
  return out;
}

}  // namespace

json diff_to_json(const DiffResult& diff, std::size_t top) {
  json series = json::array();
  for (const SeriesDiff& one : diff.series) series.push_back(series_to_json(one));
  json moved = json::array();
  const std::vector<MovedHead> heads = heads_by_movement(diff);
  for (std::size_t i = 0; i < std::min(top, heads.size()); ++i) {
    const MovedHead& head = heads[i];
    const ModelReport& model = diff.series[head.series].a;
    json entry = {{"repr", model.repr},
                  {"layer", head.layer},
                  {"head", head.head},
                  {"similarity", head.similarity}};
    if (model.attention) entry["attention"] = attention_to_json(*model.attention);
    moved.push_back(std::move(entry));
  }
  return {{"schema_version", kDiffSchemaVersion},
          {"tool", {{"name", "kvrank"}, {"version", version()}}},
          {"kind", "diff"},
          {"heads_compared", diff.heads_compared},
          {"series", std::move(series)},
          {"moved_heads", std::move(moved)}};
}

// ----------------------------------------------------------------------------------------------
// CSV / TSV: no labels or paths (they are in the JSON), so no field ever needs quoting.
// ----------------------------------------------------------------------------------------------
namespace {

std::string csv_number(double value) { return std::isnan(value) ? "" : json(value).dump(); }

std::string csv_header(const DiffResult& diff, char separator) {
  const std::string sep(1, separator);
  std::string out = "repr" + sep + "attention" + sep + "layer";
  for (const CurveField& field : metric_fields())
    for (const char* suffix : {"_a", "_b", "_change"})
      out += sep + std::string(field.name) + suffix;
  if (!diff.heads_compared) return out + "\n";
  out += sep + "min_head_similarity" + sep + "mean_head_similarity";
  const int heads = diff.series.empty() ? 0 : diff.series.front().a.geometry.heads;
  for (int h = 0; h < heads; ++h) out += sep + "head_similarity_" + std::to_string(h);
  return out + "\n";
}

}  // namespace

std::string diff_to_csv(const DiffResult& diff, char separator) {
  const std::string sep(1, separator);
  std::string out = csv_header(diff, separator);
  for (const SeriesDiff& series : diff.series) {
    const std::string attention = series.a.attention ? series_text(*series.a.attention) : "";
    for (std::size_t i = 0; i < series.a.layers.size(); ++i) {
      const LayerMetrics& a = series.a.layers[i];
      const LayerMetrics& b = series.b.layers[i];
      out += series.a.repr + sep + attention + sep + std::to_string(a.layer);
      for (const CurveField& field : metric_fields())
        for (double value : {field.value(a), field.value(b), field.value(b) - field.value(a)})
          out += sep + (field.integral ? std::to_string(std::lround(value)) : csv_number(value));
      if (!series.head_similarity.empty()) {
        const HeadSpread s = spread(series.head_similarity[i]);
        out += sep + csv_number(s.lowest) + sep + csv_number(s.mean);
        for (double value : series.head_similarity[i]) out += sep + csv_number(value);
      }
      out += "\n";
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
// Terminal table
// ----------------------------------------------------------------------------------------------
namespace {

/// A value in a `width`-character column, "—" for NaN (a zero head).
std::string cell(const char* pattern, double value, int width) {
  char buffer[64];
  if (std::isnan(value)) {
    std::snprintf(buffer, sizeof buffer, "%*s", width - 1, "");
    return std::string(buffer) + "—";
  }
  std::snprintf(buffer, sizeof buffer, pattern, width, value);
  return buffer;
}

std::string side_text(const ModelReport& model) {
  std::string text = "\"" + printable(model.label) + "\" (" + model.family + ", " + model.variant;
  if (model.step) text += ", step " + std::to_string(*model.step);
  return text + ")";
}

struct TableColumn {
  Curve curve;
  const char* title;  ///< at most 7 characters: "<title> A", "<title> B" fit a column
};
constexpr TableColumn kTableColumns[] = {
    {Curve::erank, "erank"}, {Curve::erank_centered, "centred"}, {Curve::mean_similarity, "sim"}};
constexpr int kColumn = 10;

std::string series_heading(const SeriesDiff& series) {
  std::string text = series_name(series.a) + ":  A = " + side_text(series.a) +
                     "  ->  B = " + side_text(series.b) + "\n layer";
  char title[32];
  for (const TableColumn& column : kTableColumns) {
    for (const std::string& name : {std::string(column.title) + " A",
                                    std::string(column.title) + " B", std::string("change")}) {
      std::snprintf(title, sizeof title, "%*s", kColumn, name.c_str());
      text += title;
    }
  }
  if (!series.head_similarity.empty()) text += "  lowest head similarity";
  return text + "\n";
}

std::string layer_line(const SeriesDiff& series, std::size_t i) {
  const LayerMetrics& a = series.a.layers[i];
  const LayerMetrics& b = series.b.layers[i];
  char number[16];
  std::snprintf(number, sizeof number, "%6d", a.layer);
  std::string line = number;
  for (const TableColumn& column : kTableColumns) {
    const double before = curve_value(a, column.curve);
    const double after = curve_value(b, column.curve);
    line += cell("%*.3f", before, kColumn) + cell("%*.3f", after, kColumn) +
            cell("%+*.3f", after - before, kColumn);
  }
  if (!series.head_similarity.empty()) {
    const HeadSpread s = spread(series.head_similarity[i]);
    line += cell("%*.4f", s.lowest, 8);
    if (s.lowest_head >= 0) line += " (head " + std::to_string(s.lowest_head) + ")";
  }
  return line + "\n";
}

std::string moved_heads_text(const DiffResult& diff, std::size_t top) {
  const std::vector<MovedHead> heads = heads_by_movement(diff);
  if (heads.empty() || top == 0) return "";
  std::string out = "\nheads that moved most (lowest cosine similarity of A_h and B_h):\n";
  char line[128];
  for (std::size_t i = 0; i < std::min(top, heads.size()); ++i) {
    const MovedHead& head = heads[i];
    std::snprintf(line, sizeof line, "  %-4s layer %4d  head %4d  similarity %8.4f\n",
                  series_name(diff.series[head.series].a).c_str(), head.layer, head.head,
                  head.similarity);
    out += line;
  }
  return out;
}

}  // namespace

std::string diff_to_table(const DiffResult& diff, std::size_t top) {
  std::string out;
  for (std::size_t s = 0; s < diff.series.size(); ++s) {
    const SeriesDiff& series = diff.series[s];
    if (s) out += "\n";
    out += series_heading(series);
    for (std::size_t i = 0; i < series.a.layers.size(); ++i) out += layer_line(series, i);
  }
  if (!diff.heads_compared)
    return out +
           "\nper-layer metric changes only: result files hold no weights, so the heads were not "
           "compared (give two checkpoints for head_similarity)\n";
  return out + moved_heads_text(diff, top);
}

}  // namespace kvrank
