#include "kvrank/analysis/inspect.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string_view>

#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank {
namespace {

// Name components that precede a layer number: `model.layers.12.`, `transformer.h.3.`,
// `gpt_neox.layers.0.`, `blocks.5.`, GGUF's `blk.7.`.
constexpr std::string_view kLayerContainers[] = {"layers", "layer", "h", "blocks", "block", "blk"};

// The layer a tensor belongs to, from its name; nullopt for embeddings, final norms, etc. The
// number itself follows layer_number(), the rule layout detection reads layers by.
std::optional<int> layer_of(std::string_view name) {
  std::string_view previous;
  while (!name.empty()) {
    const std::size_t dot = name.find('.');
    const std::string_view component = name.substr(0, dot);
    const bool is_container = std::find(std::begin(kLayerContainers), std::end(kLayerContainers),
                                        previous) != std::end(kLayerContainers);
    if (is_container && dot != std::string_view::npos) {
      if (const std::optional<int> layer = layer_number(component)) return layer;
    }
    if (dot == std::string_view::npos) break;
    previous = component;
    name.remove_prefix(dot + 1);
  }
  return std::nullopt;
}

// Non-layer tensors first, then layer by layer; by name within a group.
bool layer_then_name(const TensorView& a, const TensorView& b) {
  const int layer_a = layer_of(a.name).value_or(-1), layer_b = layer_of(b.name).value_or(-1);
  return layer_a != layer_b ? layer_a < layer_b : a.name < b.name;
}

nlohmann::json optional_int(const std::optional<int>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

std::uint64_t total_bytes(const std::vector<TensorView>& tensors) {
  std::uint64_t total = 0;
  for (const TensorView& tensor : tensors) total += tensor.byte_size();
  return total;
}

/// The geometry under the names results use (result_model.hpp); null when `layout` is null.
void put_geometry(nlohmann::json& entry, const ModelLayout* layout) {
  entry["family"] = layout ? nlohmann::json(family_name(layout->family)) : nlohmann::json();
  entry["model_type"] =
      layout && !layout->model_type.empty() ? nlohmann::json(layout->model_type) : nlohmann::json();
  entry["variant"] = layout ? nlohmann::json(variant_name(layout->variant)) : nlohmann::json();
  for (const GeometryField& field : geometry_fields())
    entry[std::string(field.name)] =
        layout ? nlohmann::json((*layout).*field.value) : nlohmann::json(nullptr);
  for (const OptionalGeometryField& field : optional_geometry_fields())
    entry[std::string(field.name)] =
        layout ? optional_int((*layout).*field.value) : nlohmann::json(nullptr);
  // A hybrid's attention layers under the model's own numbers; null when every layer has heads.
  entry["attention_layers"] = layout && !layout->attention_layers.empty()
                                  ? nlohmann::json(layout->attention_layers)
                                  : nlohmann::json(nullptr);
}

/// Each attention series with its own geometry: {"attention": {"stack", "kind"} or null, ...}.
nlohmann::json series_json(const std::vector<ModelLayout>& series) {
  nlohmann::json entries = nlohmann::json::array();
  for (const ModelLayout& layout : series) {
    nlohmann::json entry = {{"attention", nullptr}};
    if (layout.attention)
      entry["attention"] = {{"stack", stack_name(layout.attention->stack)},
                            {"kind", kind_name(layout.attention->kind)}};
    put_geometry(entry, &layout);
    entries.push_back(std::move(entry));
  }
  return entries;
}

nlohmann::json report_json(const InspectReport& report) {
  nlohmann::json checkpoint = {{"path", report.path}};
  // The top-level geometry is the first series' (the whole model's, for decoder-only models).
  put_geometry(checkpoint, report.series.empty() ? nullptr : &report.series.front());
  checkpoint["series"] = series_json(report.series);
  checkpoint["detection_error"] = report.detection_error.empty()
                                      ? nlohmann::json(nullptr)
                                      : nlohmann::json(report.detection_error);
  checkpoint["num_tensors"] = report.tensors.size();
  checkpoint["total_bytes"] = total_bytes(report.tensors);
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorView& tensor : report.tensors) {
    const nlohmann::json stored =
        tensor.stored_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(tensor.stored_name);
    tensors.push_back({{"name", tensor.name},
                       {"dtype", dtype_name(tensor.dtype)},
                       {"shape", tensor.shape},
                       {"bytes", tensor.byte_size()},
                       {"layer", optional_int(layer_of(tensor.name))},
                       {"stored_name", stored}});
  }
  checkpoint["tensors"] = std::move(tensors);
  return checkpoint;
}

/// "heads 8, kv_heads 2, head_dim 64, d_model 512, layers 4[, lrkv_rank …][, kv_lora_rank …]"
std::string geometry_text(const ModelLayout& layout) {
  std::ostringstream out;
  out << "heads " << layout.heads << ", kv_heads " << layout.kv_heads << ", head_dim "
      << layout.head_dim << ", d_model " << layout.d_model << ", layers " << layout.num_layers;
  if (layout.lrkv_rank) out << ", lrkv_rank " << *layout.lrkv_rank;
  if (layout.mla_kv_lora_rank) out << ", kv_lora_rank " << *layout.mla_kv_lora_rank;
  return out.str();
}

/// "attention in layers 2, 6, 10 (3 of 12)" for a hybrid; "" when every layer has heads.
std::string attention_layers_text(const ModelLayout& layout) {
  if (layout.attention_layers.empty()) return "";
  std::string text = "attention in layers ";
  for (std::size_t i = 0; i < layout.attention_layers.size(); ++i)
    text += (i ? ", " : "") + std::to_string(layout.attention_layers[i]);
  return text + " (" + std::to_string(layout.attention_layers.size()) + " of " +
         std::to_string(layout.num_layers) + ")";
}

void write_summary(std::ostringstream& out, const InspectReport& report) {
  out << printable(report.path) << "\n";  // names are escaped: this text is for a terminal
  if (report.series.empty()) {
    out << "  detection failed: " << report.detection_error << "\n";
  } else {
    const ModelLayout& model = report.series.front();
    out << "  family " << family_name(model.family);
    if (!model.model_type.empty() && model.model_type != family_name(model.family))
      out << " (model type " << model.model_type << ")";
    out << ", variant " << variant_name(model.variant) << "\n";
    for (const ModelLayout& layout : report.series) {
      out << "  ";
      if (layout.attention) out << series_text(*layout.attention) << ": ";
      out << geometry_text(layout) << "\n";
      if (const std::string layers = attention_layers_text(layout); !layers.empty())
        out << "  " << layers << "\n";
    }
  }
  out << "  " << report.tensors.size() << " tensors, " << human_bytes(total_bytes(report.tensors))
      << "\n";
}

void write_tensors(std::ostringstream& out, const std::vector<TensorView>& tensors) {
  std::size_t name_width = 0, dtype_width = 0, shape_width = 0;
  for (const TensorView& tensor : tensors) {
    name_width = std::max(name_width, printable(tensor.name).size());
    dtype_width = std::max(dtype_width, dtype_name(tensor.dtype).size());
    shape_width = std::max(shape_width, tensor.shape_string().size());
  }
  std::optional<int> group;
  bool first = true;
  for (const TensorView& tensor : tensors) {
    std::optional<int> layer = layer_of(tensor.name);
    if (first || layer != group) {
      out << "\n  " << (layer ? "layer " + std::to_string(*layer) : std::string("other tensors"))
          << "\n";
      group = layer;
      first = false;
    }
    std::string name = printable(tensor.name), dtype(dtype_name(tensor.dtype));
    std::string shape = tensor.shape_string();
    name.resize(name_width, ' ');
    dtype.resize(dtype_width, ' ');
    shape.resize(shape_width, ' ');
    out << "    " << name << "  " << dtype << "  " << shape << "  "
        << human_bytes(tensor.byte_size());
    if (!tensor.stored_name.empty()) out << "  (" << tensor.stored_name << " in the file)";
    out << "\n";
  }
}

}  // namespace

InspectReport inspect_checkpoint(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  InspectReport report;
  report.path = checkpoint.path().string();
  report.tensors = checkpoint.tensors();
  std::stable_sort(report.tensors.begin(), report.tensors.end(), layer_then_name);
  try {
    report.series = detect_series(checkpoint, overrides);
  } catch (const Error& error) {
    report.detection_error = error.what();
  } catch (const std::logic_error& error) {  // a family not implemented yet: still inspectable
    report.detection_error = error.what();
  }
  return report;
}

nlohmann::json to_json(const std::vector<InspectReport>& reports) {
  nlohmann::json checkpoints = nlohmann::json::array();
  for (const InspectReport& report : reports) checkpoints.push_back(report_json(report));
  return {{"schema_version", 1}, {"checkpoints", std::move(checkpoints)}};
}

std::string to_text(const std::vector<InspectReport>& reports) {
  std::ostringstream out;
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (i > 0) out << "\n";
    write_summary(out, reports[i]);
    write_tensors(out, reports[i].tensors);
  }
  return out.str();
}

}  // namespace kvrank
