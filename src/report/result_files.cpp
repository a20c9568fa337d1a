// The JSON reader of analysis results (docs/result-format.md): every file is checked to the rules
// of the JSON Schema (docs/schema/); the JSON writer is in result_json_writer.cpp, CSV and TSV in
// csv.cpp, the terminal table in table.cpp.
#include "kvrank/report/result_files.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "report/field_reader.hpp"
#include "report/head_pairs_json.hpp"

namespace kvrank {

using nlohmann::json;
using report_detail::FieldReader;

// ----------------------------------------------------------------------------------------------
// JSON reader
// ----------------------------------------------------------------------------------------------
namespace {

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

/// The keys a layer of this schema version may have.
std::vector<std::string_view> layer_keys(const SchemaNames& names) {
  std::vector<std::string_view> keys{"layer", names.kept_heads, "eigenvalues",
                                     "eigenvalues_centered", "head_erank", "head_norm",
                                     "zero_heads", "similarity",
                                     // analyze --pairs K (optional: report/head_pairs_json.hpp)
                                     "similar_pairs", "nearest_head", "nearest_head_similarity"};
  for (const CurveField& field : metric_fields()) keys.push_back(field.name);
  return keys;
}

LayerMetrics layer_from_json(const json& value, const std::string& where, const std::string& file,
                             const SchemaNames& names, int version, std::vector<Curve>& absent) {
  const FieldReader reader(value, where, file);
  reader.allow_only(layer_keys(names));
  LayerMetrics layer;
  layer.layer = reader.count("layer");
  layer.heads = reader.count(names.kept_heads);
  report_detail::read_curves(reader, metric_fields(), version, layer, absent);
  layer.eigenvalues = reader.numbers("eigenvalues");
  layer.eigenvalues_centered = reader.numbers("eigenvalues_centered");
  layer.head_erank = reader.numbers("head_erank");
  layer.head_norm = reader.numbers("head_norm");
  layer.zero_heads = reader.counts("zero_heads");
  if (reader.has("similarity")) layer.similarity = similarity_from_json(reader, layer.heads);
  detail::read_head_pairs(value, where, file, layer);  // --pairs
  return layer;
}

ModelGeometry geometry_from_json(const FieldReader& reader) {
  ModelGeometry geometry;
  for (const GeometryField& field : geometry_fields())
    geometry.*field.value = reader.count(field.name.data());
  for (const OptionalGeometryField& field : optional_geometry_fields())
    geometry.*field.value = reader.optional_count(field.name.data(), 1);
  return geometry;
}

Provenance provenance_from_json(const FieldReader& model) {
  Provenance source;
  const FieldReader origin(model.field("source"), model.place("source"), model.file());
  origin.allow_only({"input", "hf_repo", "hf_revision"});
  source.input = origin.optional_string("input");
  source.hf_repo = origin.optional_string("hf_repo");
  source.hf_revision = origin.optional_string("hf_revision");
  source.dtype = model.optional_string("dtype");
  const FieldReader options(model.field("options"), model.place("options"), model.file());
  options.allow_only({"layers", "map", "qk_norm_gain", "input_norm_gain"});
  source.layers = options.optional_string("layers");
  source.map = options.optional_string("map");
  source.qk_norm_gain = options.optional_choice("qk_norm_gain", kNormGainNames);
  // Recorded since after schema 2 was first written: absent reads as not folded.
  if (options.has("input_norm_gain"))
    source.input_norm_gain = options.optional_choice("input_norm_gain", kNormGainNames);
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
  if (!model.has_value("attention")) return std::nullopt;
  const FieldReader reader(model.field("attention"), model.place("attention"), model.file());
  reader.allow_only({"stack", "kind"});
  return AttentionSeries{named_value(reader, "stack", &stack_named, stack_list()),
                         named_value(reader, "kind", &kind_named, kind_list())};
}

/// The optional "attention_layers" of a hybrid (absent or null: every layer has heads): layer
/// numbers, increasing, each below num_layers.
std::vector<int> attention_layers_from_json(const FieldReader& model, int num_layers) {
  if (!model.has_value("attention_layers")) return {};
  std::vector<int> layers = model.counts("attention_layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] >= num_layers || (i > 0 && layers[i] <= layers[i - 1]))
      model.fail(model.place("attention_layers"),
                 "expected increasing layer numbers from 0 to num_layers − 1 (" +
                     std::to_string(num_layers - 1) + "), found " + std::to_string(layers[i]) +
                     " at [" + std::to_string(i) + "]");
  }
  return layers;
}

/// The keys a model may have (any schema version: version 1 lacks some of them).
std::vector<std::string_view> model_keys() {
  std::vector<std::string_view> keys{"label",   "path",    "step",      "source",
                                     "dtype",   "options", "family",    "model_type",
                                     "variant", "repr",    "attention", "attention_layers",
                                     "layers",  "summary", "run"};
  for (const GeometryField& field : geometry_fields()) keys.push_back(field.name);
  for (const OptionalGeometryField& field : optional_geometry_fields()) keys.push_back(field.name);
  return keys;
}

/// Rules the schema cannot state: a layer keeps at most the model's heads in S.
void require_kept_heads_within(const ModelReport& model, const FieldReader& reader,
                               const SchemaNames& names) {
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].heads <= model.geometry.heads) continue;
    reader.fail(reader.place("layers") + "[" + std::to_string(i) + "]." + names.kept_heads,
                "expected at most heads (" + std::to_string(model.geometry.heads) + "), found " +
                    std::to_string(model.layers[i].heads));
  }
}

void read_layers(const FieldReader& reader, int version, ModelReport& model) {
  const SchemaNames names{version >= 2 ? "kept_heads" : "heads"};
  const json& layers = reader.array("layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    model.layers.push_back(layer_from_json(layers[i],
                                           reader.place("layers") + "[" + std::to_string(i) + "]",
                                           reader.file(), names, version, model.absent_curves));
  }
  require_kept_heads_within(model, reader, names);
  const FieldReader summary(reader.field("summary"), reader.place("summary"), reader.file());
  model.summary = report_detail::read_summary(summary, metric_fields(), version);
}

ModelReport model_from_json(const json& value, const std::string& where, const std::string& file,
                            int version) {
  const FieldReader reader(value, where, file);
  reader.allow_only(model_keys());
  ModelReport model;
  model.label = reader.string("label");
  model.path = reader.string("path");
  // Version 1 has no step, but files written by hand in its shape may carry one: it is read.
  if (version >= 2 || reader.has("step")) model.step = reader.optional_step("step");
  if (version >= 2) model.source = provenance_from_json(reader);
  model.family = reader.string("family");
  if (reader.has_value("model_type")) model.model_type = reader.string("model_type");
  model.variant = reader.string("variant");
  model.geometry = geometry_from_json(reader);
  model.repr = reader.choice("repr", kReprNames);
  model.attention = attention_from_json(reader);
  model.attention_layers = attention_layers_from_json(reader, model.geometry.num_layers);
  // The named training run (absent or null: none; training_run() reads the path then).
  if (reader.has_value("run")) model.run = reader.string("run");
  read_layers(reader, version, model);
  return model;
}

/// The "tool" object: kvrank's name and version.
void require_kvrank(const FieldReader& document) {
  const FieldReader tool(document.field("tool"), "tool", document.file());
  tool.allow_only({"name", "version"});
  tool.choice("name", {"kvrank"});
  tool.string("version");
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
  reader.allow_only({"schema_version", "tool", "models"});
  require_kvrank(reader);
  const json& models = reader.array("models");
  std::vector<ModelReport> reports;
  for (std::size_t i = 0; i < models.size(); ++i) {
    reports.push_back(model_from_json(models[i], "models[" + std::to_string(i) + "]", file_name,
                                      version.get<int>()));
  }
  return reports;
}

}  // namespace kvrank
