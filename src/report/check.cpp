// `kvrank check`: compares per-layer metrics of two result sets within tolerances.
#include "kvrank/report/check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "kvrank/base/error.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank {

namespace {

using ModelKey = std::pair<std::string, std::string>;  // (label, repr)

// Models are told apart by label, and by repr when one label comes with several representations.
// Labels come from the files: quoted as excerpts, so that a 100 MB label makes a short line.
std::string describe(const ModelKey& key, bool with_repr) {
  std::string text = "model \"" + excerpt(key.first) + "\"";
  if (with_repr) text += " (repr " + excerpt(key.second) + ")";
  return text;
}

std::map<ModelKey, const ModelReport*> index_models(const std::vector<ModelReport>& models,
                                                    const std::string& file) {
  std::map<ModelKey, const ModelReport*> index;
  for (const ModelReport& model : models) {
    const ModelKey key{model.label, model.repr};
    if (!index.emplace(key, &model).second) {
      throw Error(file, "two models labelled \"" + excerpt(model.label) + "\" with repr " +
                            excerpt(model.repr) + " (labels must be unique to be compared)");
    }
  }
  return index;
}

bool has_several_reprs(const std::vector<ModelReport>& models) {
  std::set<std::string> reprs;
  for (const ModelReport& model : models) reprs.insert(model.repr);
  return reprs.size() > 1;
}

// "0-4,7,9-11": a compact list of layer indices for error messages.
std::string layer_ranges(const std::vector<LayerMetrics>& layers) {
  std::set<int> indices;
  for (const LayerMetrics& layer : layers) indices.insert(layer.layer);
  if (indices.empty()) return "none";
  std::string text;
  auto it = indices.begin();
  while (it != indices.end()) {
    const int first = *it;
    int last = first;
    while (std::next(it) != indices.end() && *std::next(it) == last + 1) last = *++it;
    ++it;
    if (!text.empty()) text += ',';
    text += std::to_string(first);
    if (last != first) text += '-' + std::to_string(last);
  }
  return text;
}

/// A metric that a file's schema_version predates cannot be compared.
void require_recorded(const ModelReport& model, Curve metric, const std::string& file,
                      const std::string& name) {
  if (std::find(model.absent_curves.begin(), model.absent_curves.end(), metric) ==
      model.absent_curves.end())
    return;
  throw Error(file, name + " has no \"" + std::string(curve_name(metric)) +
                        "\" (the file's schema_version predates it)");
}

std::map<int, const LayerMetrics*> index_layers(const std::vector<LayerMetrics>& layers) {
  std::map<int, const LayerMetrics*> index;
  for (const LayerMetrics& layer : layers) index.emplace(layer.layer, &layer);
  return index;
}

// A value as the reports print it: 6 decimals, or 6 significant digits where the decimals would
// take more than a line (1.8e308 has 309 digits before the point).
std::string number_text(double value) {
  char buffer[32];
  const bool fixed = std::fabs(value) < 1e9;  // NaN and infinities print short in either form
  std::snprintf(buffer, sizeof buffer, fixed ? "%.6f" : "%.6g", value);
  return buffer;
}

std::string signed_number_text(double value) {
  return (std::signbit(value) ? "" : "+") + number_text(value);
}

std::string right_aligned(const std::string& text, std::size_t width) {
  return std::string(width - std::min(width, text.size()), ' ') + text;
}

constexpr std::array<Named<Direction>, 3> kDirections{
    {{Direction::down, "down"}, {Direction::up, "up"}, {Direction::both, "both"}}};
static_assert(in_enum_order(kDirections));

// Passing needs the difference within abs_tol, or (when given) within rel_tol·|golden|, or a
// change in the direction not checked. Written as "not within" so that a NaN difference is a
// violation, never a silent pass.
bool within_tolerance(double current, double golden, const CheckOptions& options) {
  if (options.direction == Direction::down && current > golden) return true;
  if (options.direction == Direction::up && current < golden) return true;
  const double difference = std::fabs(current - golden);
  if (difference <= options.abs_tol) return true;
  return options.rel_tol && difference <= *options.rel_tol * std::fabs(golden);
}

}  // namespace

std::string_view direction_name(Direction direction) noexcept {
  return name_of(kDirections, direction);
}

std::vector<std::string> direction_names() { return names_of(kDirections); }

Direction parse_direction(std::string_view name) {
  if (const auto direction = value_named(kDirections, name, &Named<Direction>::value))
    return *direction;
  throw Error("", "--direction: " + expected_name(kDirections, name));
}

namespace {

/// A tolerance: a finite number, 0 or more. NaN would flag every value (it fails every
/// comparison), an infinity pass every one: neither is a tolerance.
void check_tolerance(const char* option, double value) {
  if (std::isfinite(value) && value >= 0) return;
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.6g", value);  // 1.8e308 in a few digits, not 309
  throw Error("", std::string(option) + ": must be a finite number, 0 or more, found " + shown);
}

}  // namespace

void validate(const CheckOptions& options) {
  if (options.metrics.empty()) throw Error("", "--metric: at least one metric is required");
  check_tolerance("--abs-tol", options.abs_tol);
  if (options.rel_tol) check_tolerance("--rel-tol", *options.rel_tol);
}

std::vector<Violation> check_reports(const std::vector<ModelReport>& current,
                                     const std::vector<ModelReport>& golden,
                                     const CheckOptions& options, const std::string& current_file,
                                     const std::string& golden_file) {
  validate(options);

  const auto current_models = index_models(current, current_file);
  const auto golden_models = index_models(golden, golden_file);
  const bool with_repr = has_several_reprs(current) || has_several_reprs(golden);
  for (const auto& [key, model] : current_models) {
    if (!golden_models.count(key)) {
      throw Error(golden_file, "no " + describe(key, with_repr) + " to compare with " +
                                   current_file + " (models are matched by label)");
    }
  }

  std::vector<Violation> violations;
  for (const ModelReport& gold_model : golden) {
    const ModelKey key{gold_model.label, gold_model.repr};
    const auto found = current_models.find(key);
    if (found == current_models.end()) {
      throw Error(current_file, "no " + describe(key, with_repr) + " as in " + golden_file +
                                    " (models are matched by label)");
    }
    const ModelReport& cur_model = *found->second;
    // A label names a checkpoint; the same label at another training step is another checkpoint
    // (a step unknown on either side — null — cannot tell, and is compared).
    if (cur_model.step && gold_model.step && *cur_model.step != *gold_model.step) {
      throw Error(current_file, describe(key, with_repr) + " is at step " +
                                    std::to_string(*cur_model.step) + " but at step " +
                                    std::to_string(*gold_model.step) + " in " + golden_file +
                                    " (a label names one checkpoint)");
    }
    for (const Curve metric : options.metrics) {
      require_recorded(cur_model, metric, current_file, describe(key, with_repr));
      require_recorded(gold_model, metric, golden_file, describe(key, with_repr));
    }
    const auto cur_layers = index_layers(cur_model.layers);
    const auto gold_layers = index_layers(gold_model.layers);
    if (cur_layers.size() != gold_layers.size() ||
        !std::equal(cur_layers.begin(), cur_layers.end(), gold_layers.begin(),
                    [](const auto& a, const auto& b) { return a.first == b.first; })) {
      throw Error(current_file, describe(key, with_repr) + " has layers " +
                                    layer_ranges(cur_model.layers) + " but " + golden_file +
                                    " has layers " + layer_ranges(gold_model.layers));
    }
    for (const auto& [index, gold_layer] : gold_layers) {
      const LayerMetrics& cur_layer = *cur_layers.at(index);
      for (const Curve metric : options.metrics) {
        const double gold_value = curve_value(*gold_layer, metric);
        const double cur_value = curve_value(cur_layer, metric);
        if (!within_tolerance(cur_value, gold_value, options)) {
          violations.push_back(
              {gold_model.label, gold_model.repr, index, metric, gold_value, cur_value});
        }
      }
    }
  }
  return violations;
}

std::string format_violations(const std::vector<Violation>& raw_violations) {
  if (raw_violations.empty()) return "";
  // Labels come from the result files: escaped, so that they cannot write to the terminal.
  std::vector<Violation> violations = raw_violations;
  for (Violation& v : violations) {
    v.label = printable(v.label);
    v.repr = printable(v.repr);
  }
  std::size_t label_width = 5;
  std::size_t repr_width = 4;
  std::size_t metric_width = 6;
  for (const Violation& v : violations) {
    label_width = std::max(label_width, v.label.size());
    repr_width = std::max(repr_width, v.repr.size());
    metric_width = std::max(metric_width, curve_name(v.metric).size());
  }
  const auto pad = [](const std::string& text, std::size_t width) {
    return text + std::string(width - std::min(width, text.size()), ' ');
  };
  std::string out = pad("label", label_width) + "  " + pad("repr", repr_width) + "  layer  " +
                    pad("metric", metric_width) + "      golden     current        diff\n";
  for (const Violation& v : violations) {
    out += pad(v.label, label_width) + "  " + pad(v.repr, repr_width) + "  " +
           right_aligned(std::to_string(v.layer), 5) + "  " +
           pad(std::string(curve_name(v.metric)), metric_width) + "  " +
           right_aligned(number_text(v.golden), 10) + "  " +
           right_aligned(number_text(v.current), 10) + "  " +
           right_aligned(signed_number_text(v.current - v.golden), 10) + "\n";
  }
  return out;
}

namespace {

std::string tolerance_text(const CheckOptions& options) {
  std::string text = "abs-tol " + number_text(options.abs_tol);
  if (options.rel_tol) text += ", rel-tol " + number_text(*options.rel_tol);
  return text + ", direction " + std::string(direction_name(options.direction));
}

// GitHub's workflow commands end a message at a line break and split properties at ',' and ':'
// (their documented escapes).
std::string github_escape(const std::string& text, bool property) {
  std::string out;
  for (char c : text) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else if (property && c == ':')
      out += "%3A";
    else if (property && c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : printable(text)) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

nlohmann::json check_to_json(const std::vector<Violation>& violations, const CheckOptions& options,
                             const std::string& current_file, const std::string& golden_file) {
  nlohmann::json metrics = nlohmann::json::array();
  for (Curve metric : options.metrics) metrics.push_back(curve_name(metric));
  nlohmann::json changes = nlohmann::json::array();
  for (const Violation& v : violations)
    changes.push_back({{"label", v.label},
                       {"repr", v.repr},
                       {"layer", v.layer},
                       {"metric", curve_name(v.metric)},
                       {"golden", v.golden},
                       {"current", v.current},
                       {"diff", v.current - v.golden}});
  return {{"current", current_file},
          {"golden", golden_file},
          {"metrics", std::move(metrics)},
          {"abs_tol", options.abs_tol},
          {"rel_tol", options.rel_tol ? nlohmann::json(*options.rel_tol) : nlohmann::json()},
          {"direction", direction_name(options.direction)},
          {"passed", violations.empty()},
          {"changes", std::move(changes)}};
}

namespace {

/// GitHub shows at most 10 annotations of one kind per step; the job summary holds every change.
constexpr std::size_t kMaxAnnotations = 10;
/// Changes spelled out in one group's annotation before "and N more".
constexpr std::size_t kChangesPerAnnotation = 5;

std::string change_text(const Violation& v) {
  return "layer " + std::to_string(v.layer) + ": " + std::string(curve_name(v.metric)) +
         " changed from " + number_text(v.golden) + " to " + number_text(v.current);
}

/// The violations grouped per model and representation, in the order they first appear.
std::vector<std::vector<const Violation*>> groups_of(const std::vector<Violation>& violations) {
  std::vector<std::vector<const Violation*>> groups;
  for (const Violation& v : violations) {
    auto same = [&](const std::vector<const Violation*>& group) {
      return group.front()->label == v.label && group.front()->repr == v.repr;
    };
    const auto found = std::find_if(groups.begin(), groups.end(), same);
    if (found == groups.end())
      groups.push_back({&v});
    else
      found->push_back(&v);
  }
  return groups;
}

std::string group_message(const std::vector<const Violation*>& group) {
  const Violation& first = *group.front();
  const std::string model = "model \"" + first.label + "\" (repr " + first.repr + ")";
  if (group.size() == 1) return model + " " + change_text(first);
  std::string message = model + ": " + std::to_string(group.size()) + " values changed: ";
  for (std::size_t i = 0; i < group.size() && i < kChangesPerAnnotation; ++i)
    message += (i == 0 ? "" : "; ") + change_text(*group[i]);
  if (group.size() > kChangesPerAnnotation)
    message += "; and " + std::to_string(group.size() - kChangesPerAnnotation) +
               " more (the job summary lists them)";
  return message;
}

}  // namespace

std::string github_annotations(const std::vector<Violation>& violations,
                               const std::string& current_file) {
  const auto groups = groups_of(violations);
  const std::string head =
      "::error file=" + github_escape(current_file, true) + ",title=kvrank check::";
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i + 1 == kMaxAnnotations && groups.size() > kMaxAnnotations) {
      out += head +
             github_escape(std::to_string(groups.size() - i) +
                               " more models or representations changed (the job summary "
                               "lists them)",
                           false) +
             "\n";
      break;
    }
    out += head + github_escape(group_message(groups[i]), false) + "\n";
  }
  return out;
}

std::string markdown_summary(const std::vector<Violation>& violations, const CheckOptions& options,
                             const std::string& current_file, const std::string& golden_file) {
  std::string out = "### kvrank check\n\n`" + markdown_cell(current_file) + "` against `" +
                    markdown_cell(golden_file) + "` (" + tolerance_text(options) + "): ";
  if (violations.empty()) return out + "every value within tolerance.\n";
  out += std::to_string(violations.size()) + " value(s) changed beyond tolerance.\n\n";
  out += "| label | repr | layer | metric | golden | current | diff |\n";
  out += "|---|---|---:|---|---:|---:|---:|\n";
  for (const Violation& v : violations)
    out += "| " + markdown_cell(v.label) + " | " + markdown_cell(v.repr) + " | " +
           std::to_string(v.layer) + " | " + std::string(curve_name(v.metric)) + " | " +
           number_text(v.golden) + " | " + number_text(v.current) + " | " +
           number_text(v.current - v.golden) + " |\n";
  return out;
}

}  // namespace kvrank
