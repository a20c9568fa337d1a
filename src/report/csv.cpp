// CSV and TSV of analysis results (result_files.hpp): one row per model and layer, or with
// `summary` one per model — tidy tables a DataFrame can group by family, variant, geometry or step.
#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <type_traits>

#include "kvrank/report/result_files.hpp"

namespace kvrank {

// ----------------------------------------------------------------------------------------------
// CSV / TSV writer
// ----------------------------------------------------------------------------------------------
namespace {

// The shortest text that reads back as exactly the same double (std::to_chars).
std::string shortest_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// The number as text: integral metrics as integers, others in their shortest exact form.
std::string metric_text(const CurveField& field, double value) {
  return field.integral ? std::to_string(static_cast<long long>(value)) : shortest_double(value);
}

template <typename T>
std::string optional_text(const std::optional<T>& value) {
  if (!value) return "";
  if constexpr (std::is_same_v<T, std::string>) {
    return *value;
  } else {
    return std::to_string(*value);
  }
}

/// One row being written: RFC 4180 quoting (a field holding the separator, a quote or a line
/// break is quoted, inner quotes doubled), which pandas also reads for TSV.
class Row {
 public:
  explicit Row(char separator) : separator_(separator) {}

  Row& add(const std::string& text) {
    if (!first_) text_ += separator_;
    first_ = false;
    const char special[] = {separator_, '"', '\r', '\n', '\0'};
    if (text.find_first_of(special) == std::string::npos) {
      text_ += text;
      return *this;
    }
    text_ += '"';
    for (char c : text) {
      if (c == '"') text_ += '"';
      text_ += c;
    }
    text_ += '"';
    return *this;
  }

  std::string line() const { return text_ + '\n'; }

 private:
  char separator_;
  bool first_ = true;
  std::string text_;
};

/// Whether the table has the attention_stack and attention_kind columns: only when some model is a
/// series of an encoder or encoder-decoder, so that the tables of other models stay as they were.
bool has_attention_columns(const std::vector<ModelReport>& models) {
  return std::any_of(models.begin(), models.end(),
                     [](const ModelReport& model) { return model.attention.has_value(); });
}

// The columns that describe the model, the same in both kinds of table.
void add_model_titles(Row& row, bool attention) {
  row.add("label").add("step").add("source").add("family").add("variant").add("repr");
  if (attention) row.add("attention_stack").add("attention_kind");
  for (const GeometryField& field : geometry_fields()) row.add(std::string(field.name));
  for (const OptionalGeometryField& field : optional_geometry_fields())
    row.add(std::string(field.name));
}

void add_model_fields(Row& row, const ModelReport& model, bool attention) {
  row.add(model.label).add(optional_text(model.step));
  row.add(model.source.input.value_or(model.path)).add(model.family).add(model.variant);
  row.add(model.repr);
  if (attention) {  // empty for a decoder-only model beside encoder series
    row.add(model.attention ? std::string(stack_name(model.attention->stack)) : "");
    row.add(model.attention ? std::string(kind_name(model.attention->kind)) : "");
  }
  for (const GeometryField& field : geometry_fields())
    row.add(std::to_string(model.geometry.*field.value));
  for (const OptionalGeometryField& field : optional_geometry_fields())
    row.add(optional_text(model.geometry.*field.value));
}

/// Whether the table has the similar_pairs and nearest_heads columns (`analyze --pairs K`).
bool has_pair_columns(const std::vector<ModelReport>& models) {
  return std::any_of(models.begin(), models.end(), [](const ModelReport& model) {
    return std::any_of(model.layers.begin(), model.layers.end(),
                       [](const LayerMetrics& layer) { return !layer.nearest_heads.empty(); });
  });
}

std::string layer_rows(const std::vector<ModelReport>& models, char separator) {
  const bool attention = has_attention_columns(models);
  const bool pairs = has_pair_columns(models);
  Row titles(separator);
  add_model_titles(titles, attention);
  titles.add("layer").add("kept_heads");
  for (const CurveField& field : metric_fields()) titles.add(std::string(field.name));
  if (pairs) titles.add("similar_pairs").add("nearest_heads");
  std::string out = titles.line();
  for (const ModelReport& model : models) {
    for (const LayerMetrics& layer : model.layers) {
      Row row(separator);
      add_model_fields(row, model, attention);
      row.add(std::to_string(layer.layer)).add(std::to_string(layer.heads));
      for (const CurveField& field : metric_fields())
        row.add(metric_text(field, field.value(layer)));
      if (pairs)
        row.add(head_pairs_text(layer.similar_pairs, -1))
            .add(nearest_heads_text(layer.nearest_heads, -1));
      out += row.line();
    }
  }
  return out;
}

std::string summary_rows(const std::vector<ModelReport>& models, char separator) {
  const bool attention = has_attention_columns(models);
  Row titles(separator);
  add_model_titles(titles, attention);
  titles.add("layers_analysed");
  for (const CurveField& field : metric_fields())
    if (field.mean) titles.add(summary_key(field));
  std::string out = titles.line();
  for (const ModelReport& model : models) {
    Row row(separator);
    add_model_fields(row, model, attention);
    row.add(std::to_string(model.layers.size()));
    for (const CurveField& field : metric_fields())
      if (field.mean) row.add(shortest_double(model.summary.*field.mean));
    out += row.line();
  }
  return out;
}

}  // namespace

// Numbers are written in their shortest exact form (they read back bit-identical); lines end in
// "\n" (not CRLF), which every CSV reader accepts. The metric columns follow the metric table.
std::string to_csv(const std::vector<ModelReport>& models, const TableOptions& options) {
  return options.summary ? summary_rows(models, options.separator)
                         : layer_rows(models, options.separator);
}

}  // namespace kvrank
