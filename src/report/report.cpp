// Writers and readers of analysis results (SPEC.md §3): JSON, CSV, terminal table, atomic files.
#include "kvrank/report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "kvrank/error.hpp"

namespace kvrank {

using nlohmann::json;

// ----------------------------------------------------------------------------------------------
// JSON writer
// ----------------------------------------------------------------------------------------------
namespace {

json optional_int(const std::optional<int>& value) { return value ? json(*value) : json(nullptr); }

json matrix_to_json(const MatrixD& matrix) {
  json rows = json::array();
  for (Index i = 0; i < matrix.rows(); ++i) {
    json row = json::array();
    for (Index j = 0; j < matrix.cols(); ++j) row.push_back(matrix(i, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

json layer_to_json(const LayerMetrics& layer, const ReportOptions& options) {
  json out = {
      {"layer", layer.layer},
      {"heads", layer.heads},
      {"erank", layer.erank},
      {"erank_centered", layer.erank_centered},
      {"erank_pct", layer.erank_pct},
      {"erank_centered_pct", layer.erank_centered_pct},
      {"mean_similarity", layer.mean_similarity},
      {"pcs_90", layer.pcs_90},
      {"eigenvalues", layer.eigenvalues},
      {"eigenvalues_centered", layer.eigenvalues_centered},
      {"head_erank", layer.head_erank},
      {"head_norm", layer.head_norm},
      {"zero_heads", layer.zero_heads},
  };
  if (options.include_similarity) out["similarity"] = matrix_to_json(layer.similarity);
  return out;
}

json model_to_json(const ModelReport& model, const ReportOptions& options) {
  json layers = json::array();
  for (const LayerMetrics& layer : model.layers) layers.push_back(layer_to_json(layer, options));
  return {
      {"label", model.label},
      {"path", model.path},
      {"family", model.family},
      {"variant", model.variant},
      {"heads", model.heads},
      {"kv_heads", model.kv_heads},
      {"head_dim", model.head_dim},
      {"d_model", model.d_model},
      {"num_layers", model.num_layers},
      {"lrkv_rank", optional_int(model.lrkv_rank)},
      {"mla_kv_lora_rank", optional_int(model.mla_kv_lora_rank)},
      {"repr", model.repr},
      {"layers", std::move(layers)},
      {"summary",
       {{"erank_mean", model.summary.erank_mean},
        {"erank_centered_mean", model.summary.erank_centered_mean},
        {"erank_pct_mean", model.summary.erank_pct_mean},
        {"erank_centered_pct_mean", model.summary.erank_centered_pct_mean}}},
  };
}

}  // namespace

// nlohmann::json writes doubles with 17 significant digits, so the JSON round-trips exactly.
json to_json(const std::vector<ModelReport>& models, const ReportOptions& options) {
  json model_array = json::array();
  for (const ModelReport& model : models) model_array.push_back(model_to_json(model, options));
  return {
      {"schema_version", 1},
      {"tool", {{"name", "kvrank"}, {"version", KVRANK_VERSION}}},
      {"models", std::move(model_array)},
  };
}

// ----------------------------------------------------------------------------------------------
// CSV writer
// ----------------------------------------------------------------------------------------------
namespace {

// RFC 4180: a field holding a comma, a quote or a line break is quoted, inner quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

// The shortest text that reads back as exactly the same double (std::to_chars).
std::string shortest_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

}  // namespace

// Numbers are written in their shortest exact form (they read back bit-identical); lines end in
// "\n" (not CRLF), which every CSV reader accepts.
std::string to_csv(const std::vector<ModelReport>& models) {
  std::string out =
      "label,variant,repr,layer,heads,erank,erank_centered,erank_pct,erank_centered_pct,"
      "mean_similarity,pcs_90\n";
  for (const ModelReport& model : models) {
    for (const LayerMetrics& layer : model.layers) {
      out += csv_field(model.label) + ',' + csv_field(model.variant) + ',' + csv_field(model.repr);
      out += ',' + std::to_string(layer.layer) + ',' + std::to_string(layer.heads);
      for (double value : {layer.erank, layer.erank_centered, layer.erank_pct,
                           layer.erank_centered_pct, layer.mean_similarity}) {
        out += ',' + shortest_double(value);
      }
      out += ',' + std::to_string(layer.pcs_90) + '\n';
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
// Terminal table
// ----------------------------------------------------------------------------------------------
namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// A bar of `width` cells for a fraction in [0, 1], with eighth-block resolution.
std::string fraction_bar(double fraction, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  if (!std::isfinite(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int eighths = static_cast<int>(std::lround(fraction * width * 8));
  std::string bar;
  for (int i = 0; i < eighths / 8; ++i) bar += "█";
  bar += kEighths[eighths % 8];
  const int used = eighths / 8 + (eighths % 8 ? 1 : 0);
  bar.append(static_cast<std::size_t>(width - used), ' ');
  return bar;
}

std::string join_ints(const std::vector<int>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(values[i]);
  }
  return text;
}

std::string model_heading(const ModelReport& model) {
  std::string text = model.label + "  (" + model.family + ", " + model.variant;
  if (model.lrkv_rank) text += " r=" + std::to_string(*model.lrkv_rank);
  if (model.mla_kv_lora_rank) text += " kv_lora_rank=" + std::to_string(*model.mla_kv_lora_rank);
  text += ")  heads " + std::to_string(model.heads) + "  kv_heads " +
          std::to_string(model.kv_heads) + "  head_dim " + std::to_string(model.head_dim) +
          "  repr " + model.repr + "\n";
  return text;
}

std::string layer_row(const LayerMetrics& layer) {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, "%6d %9.3f %7.1f%% %9.3f %8.1f%% %9.3f %6d  ", layer.layer,
                layer.erank, layer.erank_pct, layer.erank_centered, layer.erank_centered_pct,
                layer.mean_similarity, layer.pcs_90);
  std::string row = buffer + fraction_bar(layer.erank_pct / 100.0, 10);
  if (!layer.zero_heads.empty()) row += "  zero heads: " + join_ints(layer.zero_heads);
  return row + "\n";
}

std::string summary_row(const Summary& summary) {
  return "  mean " + format("%9.3f", summary.erank_mean) + " " +
         format("%7.1f%%", summary.erank_pct_mean) + " " +
         format("%9.3f", summary.erank_centered_mean) + " " +
         format("%8.1f%%", summary.erank_centered_pct_mean) + "\n";
}

}  // namespace

std::string to_table(const std::vector<ModelReport>& models) {
  std::string out;
  for (std::size_t m = 0; m < models.size(); ++m) {
    const ModelReport& model = models[m];
    if (m) out += "\n";
    out += model_heading(model);
    out += " layer     erank  erank%   centred  centred%  mean sim  pcs90  erank/H\n";
    for (const LayerMetrics& layer : model.layers) out += layer_row(layer);
    out += summary_row(model.summary);
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
// JSON reader
// ----------------------------------------------------------------------------------------------
namespace {

// Reads fields of one JSON object, naming the object's place in the document
// ("models[2].layers[5]") in every error.
class FieldReader {
 public:
  FieldReader(const json& object, std::string where, const std::string& file)
      : object_(object), where_(std::move(where)), file_(file) {
    if (!object_.is_object()) fail(where_, "expected an object, found " + type_of(object_));
  }

  const json& field(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end()) fail(where_, std::string("missing \"") + key + "\"");
    return *it;
  }
  bool has(const char* key) const { return object_.contains(key); }
  std::string place(const char* key) const { return where_.empty() ? key : where_ + "." + key; }

  std::string string(const char* key) const {
    const json& value = field(key);
    if (!value.is_string()) fail(place(key), "expected a string, found " + type_of(value));
    return value.get<std::string>();
  }
  double number(const char* key) const { return as_number(field(key), place(key)); }
  int integer(const char* key) const { return as_int(field(key), place(key)); }
  std::optional<int> optional_integer(const char* key) const {
    const json& value = field(key);
    if (value.is_null()) return std::nullopt;
    return as_int(value, place(key));
  }
  std::vector<double> numbers(const char* key) const {
    std::vector<double> out;
    for_each_item(
        key, [&](const json& item, const std::string& at) { out.push_back(as_number(item, at)); });
    return out;
  }
  std::vector<int> integers(const char* key) const {
    std::vector<int> out;
    for_each_item(
        key, [&](const json& item, const std::string& at) { out.push_back(as_int(item, at)); });
    return out;
  }
  const json& array(const char* key) const {
    const json& value = field(key);
    if (!value.is_array()) fail(place(key), "expected an array, found " + type_of(value));
    return value;
  }

  [[noreturn]] void fail(const std::string& at, const std::string& what) const {
    throw Error(file_, at.empty() ? what : at + ": " + what);
  }

  static std::string type_of(const json& value) {
    switch (value.type()) {
      case json::value_t::null:
        return "null";
      case json::value_t::object:
        return "an object";
      case json::value_t::array:
        return "an array";
      case json::value_t::string:
        return "a string";
      case json::value_t::boolean:
        return "a boolean";
      default:
        return "a number";
    }
  }

 private:
  template <typename Function>
  void for_each_item(const char* key, Function&& function) const {
    const json& items = array(key);
    for (std::size_t i = 0; i < items.size(); ++i) {
      function(items[i], place(key) + "[" + std::to_string(i) + "]");
    }
  }

  double as_number(const json& value, const std::string& at) const {
    if (!value.is_number()) fail(at, "expected a number, found " + type_of(value));
    return value.get<double>();
  }

  int as_int(const json& value, const std::string& at) const {
    if (!value.is_number_integer()) fail(at, "expected an integer, found " + describe(value));
    if (value.is_number_unsigned()) {
      const auto number = value.get<std::uint64_t>();
      if (number > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
        fail(at, "integer " + value.dump() + " out of range");
      }
      return static_cast<int>(number);
    }
    const auto number = value.get<std::int64_t>();
    if (number < std::numeric_limits<int>::min() || number > std::numeric_limits<int>::max()) {
      fail(at, "integer " + value.dump() + " out of range");
    }
    return static_cast<int>(number);
  }

  static std::string describe(const json& value) {
    return value.is_number() ? value.dump() : type_of(value);
  }

  const json& object_;
  std::string where_;
  const std::string& file_;
};

MatrixD similarity_from_json(const FieldReader& reader, int heads) {
  const json& rows = reader.array("similarity");
  const std::string at = reader.place("similarity");
  if (rows.size() != static_cast<std::size_t>(heads)) {
    reader.fail(at, "expected " + std::to_string(heads) + " rows (heads), found " +
                        std::to_string(rows.size()));
  }
  MatrixD matrix(heads, heads);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string row_at = at + "[" + std::to_string(i) + "]";
    if (!rows[i].is_array() || rows[i].size() != rows.size()) {
      reader.fail(row_at, "expected an array of " + std::to_string(heads) + " numbers");
    }
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      if (!rows[i][j].is_number()) {
        reader.fail(row_at + "[" + std::to_string(j) + "]",
                    "expected a number, found " + FieldReader::type_of(rows[i][j]));
      }
      matrix(static_cast<Index>(i), static_cast<Index>(j)) = rows[i][j].get<double>();
    }
  }
  return matrix;
}

LayerMetrics layer_from_json(const json& value, const std::string& where, const std::string& file) {
  const FieldReader reader(value, where, file);
  LayerMetrics layer;
  layer.layer = reader.integer("layer");
  layer.heads = reader.integer("heads");
  layer.erank = reader.number("erank");
  layer.erank_centered = reader.number("erank_centered");
  layer.erank_pct = reader.number("erank_pct");
  layer.erank_centered_pct = reader.number("erank_centered_pct");
  layer.mean_similarity = reader.number("mean_similarity");
  layer.pcs_90 = reader.integer("pcs_90");
  layer.eigenvalues = reader.numbers("eigenvalues");
  layer.eigenvalues_centered = reader.numbers("eigenvalues_centered");
  layer.head_erank = reader.numbers("head_erank");
  layer.head_norm = reader.numbers("head_norm");
  layer.zero_heads = reader.integers("zero_heads");
  if (layer.heads < 0) {
    reader.fail(reader.place("heads"), "expected >= 0, found " + std::to_string(layer.heads));
  }
  if (reader.has("similarity")) layer.similarity = similarity_from_json(reader, layer.heads);
  return layer;
}

Summary summary_from_json(const json& value, const std::string& where, const std::string& file) {
  const FieldReader reader(value, where, file);
  Summary summary;
  summary.erank_mean = reader.number("erank_mean");
  summary.erank_centered_mean = reader.number("erank_centered_mean");
  summary.erank_pct_mean = reader.number("erank_pct_mean");
  summary.erank_centered_pct_mean = reader.number("erank_centered_pct_mean");
  return summary;
}

ModelReport model_from_json(const json& value, const std::string& where, const std::string& file) {
  const FieldReader reader(value, where, file);
  ModelReport model;
  model.label = reader.string("label");
  model.path = reader.string("path");
  model.family = reader.string("family");
  model.variant = reader.string("variant");
  model.heads = reader.integer("heads");
  model.kv_heads = reader.integer("kv_heads");
  model.head_dim = reader.integer("head_dim");
  model.d_model = reader.integer("d_model");
  model.num_layers = reader.integer("num_layers");
  model.lrkv_rank = reader.optional_integer("lrkv_rank");
  model.mla_kv_lora_rank = reader.optional_integer("mla_kv_lora_rank");
  model.repr = reader.string("repr");
  const json& layers = reader.array("layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    model.layers.push_back(
        layer_from_json(layers[i], where + ".layers[" + std::to_string(i) + "]", file));
  }
  model.summary = summary_from_json(reader.field("summary"), where + ".summary", file);
  return model;
}

}  // namespace

std::vector<ModelReport> reports_from_json(const json& document, const std::string& file_name) {
  const FieldReader reader(document, "", file_name);
  const json& version = reader.field("schema_version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != 1) {
    reader.fail("", "unsupported schema_version " + version.dump() + " (expected 1)");
  }
  const json& models = reader.array("models");
  std::vector<ModelReport> reports;
  for (std::size_t i = 0; i < models.size(); ++i) {
    reports.push_back(model_from_json(models[i], "models[" + std::to_string(i) + "]", file_name));
  }
  return reports;
}

// ----------------------------------------------------------------------------------------------
// Atomic file writing
// ----------------------------------------------------------------------------------------------
namespace {

std::string system_reason(int error_number) {
  std::string reason = std::strerror(error_number);
  if (!reason.empty())
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return reason;
}

// The mode a plain new file would get: 0666 less the process umask (mkstemp creates 0600).
mode_t default_file_mode() {
  const mode_t mask = umask(0);  // umask can only be read by setting it; restored at once
  umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

// Writes, sets the mode and syncs the temporary file; returns 0 or the errno of the failed step.
int fill_and_sync(int fd, const std::string& content) {
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    written += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, default_file_mode()) != 0) return errno;
  if (::fsync(fd) != 0) return errno;
  return 0;
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  std::string temp_name = (folder / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp_name.data());
  if (fd < 0) {
    throw Error(path.string(), "cannot create a temporary file in " + folder.string() + ": " +
                                   system_reason(errno));
  }
  int error_number = fill_and_sync(fd, content);
  if (::close(fd) != 0 && error_number == 0) error_number = errno;
  if (error_number != 0) {
    ::unlink(temp_name.c_str());
    throw Error(path.string(), "cannot write: " + system_reason(error_number));
  }
  if (std::rename(temp_name.c_str(), path.c_str()) != 0) {
    error_number = errno;
    ::unlink(temp_name.c_str());
    throw Error(path.string(), "cannot replace the file: " + system_reason(error_number));
  }
}

}  // namespace kvrank
