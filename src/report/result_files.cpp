// Writers and readers of analysis results (docs/result-format.md): the JSON writer and reader;
// CSV and TSV in csv.cpp, the terminal table in table.cpp.
#include "kvrank/report/result_files.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/version.hpp"

namespace kvrank {

using nlohmann::json;

// ----------------------------------------------------------------------------------------------
// JSON writer
// ----------------------------------------------------------------------------------------------
namespace {

template <typename T>
json optional_value(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json provenance_source(const Provenance& source) {
  return {{"input", optional_value(source.input)},
          {"hf_repo", optional_value(source.hf_repo)},
          {"hf_revision", optional_value(source.hf_revision)}};
}

json provenance_options(const Provenance& source) {
  return {{"layers", optional_value(source.layers)},
          {"map", optional_value(source.map)},
          {"qk_norm_gain", optional_value(source.qk_norm_gain)},
          {"input_norm_gain", optional_value(source.input_norm_gain)}};
}

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
      {"kept_heads", layer.heads},
      {"eigenvalues", layer.eigenvalues},
      {"eigenvalues_centered", layer.eigenvalues_centered},
      {"head_erank", layer.head_erank},
      {"head_norm", layer.head_norm},
      {"zero_heads", layer.zero_heads},
  };
  for (const CurveField& field : metric_fields()) {
    const double value = field.value(layer);
    out[std::string(field.name)] = field.integral ? json(static_cast<int>(value)) : json(value);
  }
  if (options.include_similarity) out["similarity"] = matrix_to_json(layer.similarity);
  return out;
}

json summary_to_json(const Summary& summary) {
  json out = json::object();
  for (const CurveField& field : metric_fields())
    if (field.mean) out[summary_key(field)] = summary.*field.mean;
  return out;
}

json model_to_json(const ModelReport& model, const ReportOptions& options) {
  json layers = json::array();
  for (const LayerMetrics& layer : model.layers) layers.push_back(layer_to_json(layer, options));
  json out = {
      {"step", optional_value(model.step)},
      {"source", provenance_source(model.source)},
      {"dtype", optional_value(model.source.dtype)},
      {"options", provenance_options(model.source)},
      {"label", model.label},
      {"path", model.path},
      {"family", model.family},
      {"model_type", model.model_type.empty() ? json() : json(model.model_type)},
      {"variant", model.variant},
      {"repr", model.repr},
      {"layers", std::move(layers)},
      {"summary", summary_to_json(model.summary)},
  };
  for (const GeometryField& field : geometry_fields())
    out[std::string(field.name)] = model.geometry.*field.value;
  for (const OptionalGeometryField& field : optional_geometry_fields())
    out[std::string(field.name)] = optional_value(model.geometry.*field.value);
  // Only an encoder's or encoder-decoder's series has the key: other results stay as they were.
  if (model.attention)
    out["attention"] = {{"stack", stack_name(model.attention->stack)},
                        {"kind", kind_name(model.attention->kind)}};
  if (!model.attention_layers.empty()) out["attention_layers"] = model.attention_layers;
  // The training run named by the caller (Python's run=); absent otherwise, as in older files.
  if (model.run) out["run"] = *model.run;
  return out;
}

}  // namespace

// nlohmann::json writes doubles with 17 significant digits, so the JSON round-trips exactly.
json to_json(const std::vector<ModelReport>& models, const ReportOptions& options) {
  json model_array = json::array();
  for (const ModelReport& model : models) model_array.push_back(model_to_json(model, options));
  return {
      {"schema_version", kSchemaVersion},
      {"tool", {{"name", "kvrank"}, {"version", version()}}},
      {"models", std::move(model_array)},
  };
}

std::string to_json_text(const json& document) {
  return document.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
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
  std::optional<std::string> optional_string(const char* key) const {
    if (field(key).is_null()) return std::nullopt;
    return string(key);
  }
  std::optional<std::int64_t> optional_int64(const char* key) const {
    const json& value = field(key);
    if (value.is_null()) return std::nullopt;
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())))
      fail(place(key), "expected an integer or null, found " + describe(value));
    return value.get<std::int64_t>();
  }
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

  const std::string& file() const { return file_; }

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
  // Every row is checked before heads² doubles are allocated: a layer claiming 100,000 heads with
  // 100,000 empty rows is a small file that would ask for 80 GB.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].is_array() || rows[i].size() != rows.size()) {
      reader.fail(at + "[" + std::to_string(i) + "]",
                  "expected an array of " + std::to_string(heads) + " numbers");
    }
  }
  MatrixD matrix(heads, heads);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string row_at = at + "[" + std::to_string(i) + "]";
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

// What the schema versions call the fields that changed name.
struct SchemaNames {
  const char* kept_heads;  ///< a layer's heads kept in S: "heads" in version 1
};

LayerMetrics layer_from_json(const json& value, const std::string& where, const std::string& file,
                             const SchemaNames& names) {
  const FieldReader reader(value, where, file);
  LayerMetrics layer;
  layer.layer = reader.integer("layer");
  layer.heads = reader.integer(names.kept_heads);
  for (const CurveField& field : metric_fields()) {
    const char* key = field.name.data();  // the table's names are string literals
    field.set(layer, field.integral ? reader.integer(key) : reader.number(key));
  }
  layer.eigenvalues = reader.numbers("eigenvalues");
  layer.eigenvalues_centered = reader.numbers("eigenvalues_centered");
  layer.head_erank = reader.numbers("head_erank");
  layer.head_norm = reader.numbers("head_norm");
  layer.zero_heads = reader.integers("zero_heads");
  if (layer.heads < 0) {
    reader.fail(reader.place(names.kept_heads),
                "expected >= 0, found " + std::to_string(layer.heads));
  }
  if (reader.has("similarity")) layer.similarity = similarity_from_json(reader, layer.heads);
  return layer;
}

Summary summary_from_json(const json& value, const std::string& where, const std::string& file) {
  const FieldReader reader(value, where, file);
  Summary summary;
  for (const CurveField& field : metric_fields())
    if (field.mean) summary.*field.mean = reader.number(summary_key(field).c_str());
  return summary;
}

ModelGeometry geometry_from_json(const FieldReader& reader) {
  ModelGeometry geometry;
  for (const GeometryField& field : geometry_fields())
    geometry.*field.value = reader.integer(field.name.data());
  for (const OptionalGeometryField& field : optional_geometry_fields())
    geometry.*field.value = reader.optional_integer(field.name.data());
  return geometry;
}

Provenance provenance_from_json(const FieldReader& model) {
  Provenance source;
  const FieldReader origin(model.field("source"), model.place("source"), model.file());
  source.input = origin.optional_string("input");
  source.hf_repo = origin.optional_string("hf_repo");
  source.hf_revision = origin.optional_string("hf_revision");
  source.dtype = model.optional_string("dtype");
  const FieldReader options(model.field("options"), model.place("options"), model.file());
  source.layers = options.optional_string("layers");
  source.map = options.optional_string("map");
  source.qk_norm_gain = options.optional_string("qk_norm_gain");
  // Recorded since after schema 2 was first written: absent reads as not folded.
  if (options.has("input_norm_gain"))
    source.input_norm_gain = options.optional_string("input_norm_gain");
  return source;
}

template <typename Enum>
Enum named_value(const FieldReader& reader, const char* key,
                 std::optional<Enum> (*named)(std::string_view) noexcept, const std::string& list) {
  const std::string name = reader.string(key);
  if (const std::optional<Enum> value = named(name)) return *value;
  reader.fail(reader.place(key), "expected " + list + ", found " + detail::json_excerpt(name));
}

/// The optional "attention" object of schema version 2 (absent or null: a decoder-only series).
std::optional<AttentionSeries> attention_from_json(const FieldReader& model) {
  if (!model.has("attention") || model.field("attention").is_null()) return std::nullopt;
  const FieldReader reader(model.field("attention"), model.place("attention"), model.file());
  return AttentionSeries{named_value(reader, "stack", &stack_named, stack_list()),
                         named_value(reader, "kind", &kind_named, kind_list())};
}

/// The optional "attention_layers" of a hybrid (absent or null: every layer has heads): layer
/// numbers, increasing, each below num_layers.
std::vector<int> attention_layers_from_json(const FieldReader& model, int num_layers) {
  if (!model.has("attention_layers") || model.field("attention_layers").is_null()) return {};
  std::vector<int> layers = model.integers("attention_layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= num_layers || (i > 0 && layers[i] <= layers[i - 1]))
      model.fail(model.place("attention_layers"),
                 "expected increasing layer numbers from 0 to num_layers − 1 (" +
                     std::to_string(num_layers - 1) + "), found " + std::to_string(layers[i]) +
                     " at [" + std::to_string(i) + "]");
  }
  return layers;
}

ModelReport model_from_json(const json& value, const std::string& where, const std::string& file,
                            int version) {
  const FieldReader reader(value, where, file);
  ModelReport model;
  model.label = reader.string("label");
  model.path = reader.string("path");
  // Version 1 has no step, but files written by hand in its shape may carry one: it is read.
  if (version >= 2 || reader.has("step")) model.step = reader.optional_int64("step");
  if (version >= 2) model.source = provenance_from_json(reader);
  const SchemaNames names{version >= 2 ? "kept_heads" : "heads"};
  model.family = reader.string("family");
  if (reader.has("model_type") && !reader.field("model_type").is_null())
    model.model_type = reader.string("model_type");
  model.variant = reader.string("variant");
  model.geometry = geometry_from_json(reader);
  model.repr = reader.string("repr");
  model.attention = attention_from_json(reader);
  model.attention_layers = attention_layers_from_json(reader, model.geometry.num_layers);
  // The named training run (absent or null: none; training_run() reads the path then).
  if (reader.has("run") && !reader.field("run").is_null()) model.run = reader.string("run");
  const json& layers = reader.array("layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    model.layers.push_back(
        layer_from_json(layers[i], where + ".layers[" + std::to_string(i) + "]", file, names));
  }
  model.summary = summary_from_json(reader.field("summary"), where + ".summary", file);
  return model;
}

}  // namespace

std::vector<ModelReport> reports_from_json(const json& document, const std::string& file_name) {
  const FieldReader reader(document, "", file_name);
  const json& version = reader.field("schema_version");
  if (!version.is_number_integer() || version.get<std::int64_t>() < 1 ||
      version.get<std::int64_t>() > kSchemaVersion) {
    reader.fail("", "unsupported schema_version " + detail::json_excerpt(version) +
                        " (expected 1 to " + std::to_string(kSchemaVersion) + ")");
  }
  const json& models = reader.array("models");
  std::vector<ModelReport> reports;
  for (std::size_t i = 0; i < models.size(); ++i) {
    reports.push_back(model_from_json(models[i], "models[" + std::to_string(i) + "]", file_name,
                                      version.get<int>()));
  }
  return reports;
}

}  // namespace kvrank
