// `kvrank merge`: parts of one job → the document one `analyze` would have written. The parts are
// read back into ModelReports and written again by the same to_json as analyze, so the merged
// file is byte-identical to a single run (doubles round-trip exactly through the JSON).
#include "kvrank/report/merge.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/report/result_files.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

std::string model_name(const ModelReport& model) {
  return "model \"" + excerpt(model.label) + "\" (repr " + excerpt(model.repr) + ")";
}

const json& tool_of(const ResultPart& part) {
  const auto tool = part.document.find("tool");
  if (tool == part.document.end() || !tool->is_object())
    throw Error(part.file, "missing \"tool\" (not a kvrank result file?)");
  return *tool;
}

std::string describe_tool(const json& tool) {
  const auto name = tool.find("name");
  const auto version = tool.find("version");
  if (name == tool.end() || version == tool.end() || !name->is_string() || !version->is_string())
    return detail::json_excerpt(tool);
  return excerpt(name->get_ref<const std::string&>()) + " " +
         excerpt(version->get_ref<const std::string&>());
}

void require_same_tool(const ResultPart& part, const ResultPart& first) {
  if (tool_of(part) == tool_of(first)) return;
  throw Error(part.file, "written by " + describe_tool(tool_of(part)) + ", but " + first.file +
                             " by " + describe_tool(tool_of(first)) +
                             ": merge parts written by one kvrank version");
}

/// A part written before a curve existed cannot be merged into a file that must hold it.
void require_every_curve(const ModelReport& model, const std::string& file,
                         const std::string& where) {
  if (model.absent_curves.empty()) return;
  throw Error(file, where + ": " + model_name(model) + " has no \"" +
                        std::string(curve_name(model.absent_curves.front())) +
                        "\" (its schema_version predates it), which merge writes: analyze the "
                        "checkpoint again");
}

/// Every layer of every part must carry a similarity matrix (`analyze --similarity`) or none.
class SimilarityPresence {
 public:
  /// `layer` is the JSON of one layer of `part` at `where` ("models[0].layers[2]").
  void check(const json& layer, const std::string& file, const std::string& where) {
    const bool has = layer.contains("similarity");
    if (!seen_in_) {
      seen_in_ = file;
      present_ = has;
    } else if (has != present_) {
      throw Error(file, where +
                            (has ? " has a similarity matrix, but " + *seen_in_ + " has none"
                                 : " has no similarity matrix, but " + *seen_in_ + " has") +
                            ": run every part with --similarity, or none");
    }
  }
  bool present() const { return present_; }

 private:
  std::optional<std::string> seen_in_;
  bool present_ = false;
};

/// One model (label × repr) being assembled from the parts that hold some of its layers.
struct ModelEntry {
  ModelReport report;  ///< description from the first part; layers from all of them
  json description;    ///< the model's JSON without its layers and summary
  std::string first_file;
  std::map<int, std::string> layer_files;  ///< layer → the part holding it
};

/// The model's JSON without what differs between the parts of one run: its layers, its summary,
/// and the --layers selection each part was cut to (the merge writes merge's own --layers).
json description_of(const json& model) {
  json description = model;
  description.erase("layers");
  description.erase("summary");
  if (const auto options = description.find("options"); options != description.end())
    if (options->is_object()) options->erase("layers");
  return description;
}

/// The same checkpoint, read the same way: path first (a shared label is the likely mistake),
/// then every other field of the model's description.
void require_same_model(const ModelEntry& entry, const json& description, const std::string& file) {
  const std::string name = model_name(entry.report);
  const json& path = description.at("path");
  if (path != entry.description.at("path"))
    throw Error(file, name + ": path is " + detail::json_excerpt(path) + ", but " +
                          detail::json_excerpt(entry.description.at("path")) + " in " +
                          entry.first_file +
                          ": two checkpoints share this label (give each its own --label)");
  for (const auto& [key, value] : description.items()) {
    const auto first = entry.description.find(key);
    if (first == entry.description.end() || *first != value)
      throw Error(file,
                  name + ": " + key + " is " + detail::json_excerpt(value) + ", but " +
                      (first == entry.description.end() ? "absent" : detail::json_excerpt(*first)) +
                      " in " + entry.first_file);
  }
  for (const auto& [key, value] : entry.description.items())
    if (!description.contains(key))
      throw Error(file, name + ": " + key + " is absent, but " + detail::json_excerpt(value) +
                            " in " + entry.first_file);
}

void add_layers(ModelEntry& entry, const std::vector<LayerMetrics>& layers,
                const std::string& file) {
  for (const LayerMetrics& layer : layers) {
    const auto [held, inserted] = entry.layer_files.emplace(layer.layer, file);
    if (!inserted)
      throw Error(file,
                  model_name(entry.report) + ": layer " + std::to_string(layer.layer) +
                      (held->second == file ? " appears twice" : " is also in " + held->second) +
                      " (overlapping parts)");
    entry.report.layers.push_back(layer);
  }
}

std::string layer_count(const ModelReport& model) {
  const int layers = model.geometry.num_layers;
  const std::string count = std::to_string(layers) + " layers";
  return layers > 0 ? count + " (0-" + std::to_string(layers - 1) + ")" : count;
}

/// num_layers is a claim of the part, and the merge lists the layers it implies: bounded like the
/// layers of a checkpoint before anything is built from it (2^31 − 1 layers would take 8 GB).
void require_layer_count(const ModelReport& model, const std::string& file) {
  if (model.geometry.num_layers >= 0 && model.geometry.num_layers <= kMaxLayers) return;
  throw Error(file,
              model_name(model) + ": num_layers " + std::to_string(model.geometry.num_layers) +
                  " is out of range (kvrank reads 0 to " + std::to_string(kMaxLayers) + " layers)");
}

/// The layers one analyze run would have analysed: all (a hybrid's attention layers), or the
/// --layers selection.
std::vector<int> expected_layers(const ModelReport& model, const MergeOptions& options) {
  if (!options.layers) return layers_with_heads(model.attention_layers, model.geometry.num_layers);
  for (int layer : *options.layers)
    if (layer >= model.geometry.num_layers)
      throw Error("", "--layers: layer " + std::to_string(layer) + " out of range (" +
                          model_name(model) + " has " + layer_count(model) + ")");
  return *options.layers;
}

/// Why a part's layer is not among the `expected` ones, for its error message.
std::string why_unexpected(const ModelReport& model, const MergeOptions& options,
                           const std::vector<int>& expected) {
  if (options.layers) return " is not in --layers " + format_layer_list(expected);
  if (model.attention_layers.empty())
    return " is out of range (the model has " + layer_count(model) + ")";
  return " has no attention heads (the model's attention layers: " + format_layer_list(expected) +
         ")";
}

/// The parts must hold exactly the layers one analyze run would have analysed.
void require_expected_layers(const ModelEntry& entry, const MergeOptions& options) {
  const ModelReport& model = entry.report;
  const std::string name = model_name(model);
  const std::vector<int> expected = expected_layers(model, options);
  std::vector<int> held;
  for (const auto& [layer, file] : entry.layer_files) {
    if (!std::binary_search(expected.begin(), expected.end(), layer))
      throw Error(file, name + ": layer " + std::to_string(layer) +
                            why_unexpected(model, options, expected));
    held.push_back(layer);
  }
  std::vector<int> missing;
  std::set_difference(expected.begin(), expected.end(), held.begin(), held.end(),
                      std::back_inserter(missing));
  if (missing.empty()) return;
  throw Error("", name + ": " + (missing.size() == 1 ? "layer " : "layers ") +
                      format_layer_list(missing) + (missing.size() == 1 ? " is" : " are") +
                      " in no part (the parts hold " +
                      (held.empty() ? "none" : format_layer_list(held)) + " of " +
                      format_layer_list(expected) + ")");
}

/// `analyze --with-baseline` appends one fully-redundant series, taken from the run's first
/// model. Each part carries its own copy; they must agree, and the merge writes it once, last.
class BaselineSlot {
 public:
  void offer(ModelReport model, const json& as_json, const std::string& file) {
    if (!report_) {
      report_ = std::move(model);
      json_ = as_json;
      file_ = file;
    } else if (as_json != json_) {
      throw Error(file, "its fully-redundant baseline differs from the one in " + file_ +
                            " (--with-baseline follows each run's first model)");
    }
  }
  void append_to(std::vector<ModelReport>& models) const {
    if (report_) models.push_back(*report_);
  }

 private:
  std::optional<ModelReport> report_;
  json json_;
  std::string file_;
};

/// Collects the models of the parts, in order of first appearance.
class Merger {
 public:
  void add(const ResultPart& part) {
    std::vector<ModelReport> models = reports_from_json(part.document, part.file);
    const json& models_json = part.document.at("models");
    for (std::size_t m = 0; m < models.size(); ++m) {
      const std::string where = "models[" + std::to_string(m) + "]";
      require_every_curve(models[m], part.file, where);
      const json& layers_json = models_json[m].at("layers");
      for (std::size_t l = 0; l < layers_json.size(); ++l)
        similarity_.check(layers_json[l], part.file, where + ".layers[" + std::to_string(l) + "]");
      if (is_baseline(models[m]))
        baseline_.offer(std::move(models[m]), models_json[m], part.file);
      else
        add_model(std::move(models[m]), models_json[m], part.file);
    }
  }

  json result(const MergeOptions& options) {
    std::vector<ModelReport> merged;
    for (ModelEntry& entry : entries_) {
      require_expected_layers(entry, options);
      std::sort(entry.report.layers.begin(), entry.report.layers.end(),
                [](const LayerMetrics& a, const LayerMetrics& b) { return a.layer < b.layer; });
      entry.report.summary = summarize(entry.report.layers);
      entry.report.source.layers =
          options.layers ? std::optional(format_layer_list(*options.layers)) : std::nullopt;
      merged.push_back(std::move(entry.report));
    }
    baseline_.append_to(merged);
    return to_json(merged, {.include_similarity = similarity_.present()});
  }

 private:
  void add_model(ModelReport model, const json& model_json, const std::string& file) {
    require_layer_count(model, file);
    const auto [found, is_new] =
        entry_of_.emplace(std::make_pair(model.label, model.repr), entries_.size());
    if (!is_new) {
      require_same_model(entries_[found->second], description_of(model_json), file);
      add_layers(entries_[found->second], model.layers, file);
      return;
    }
    const std::vector<LayerMetrics> layers = std::exchange(model.layers, {});
    entries_.push_back({std::move(model), description_of(model_json), file, {}});
    add_layers(entries_.back(), layers, file);
  }

  std::vector<ModelEntry> entries_;                                      // first appearance
  std::map<std::pair<std::string, std::string>, std::size_t> entry_of_;  // (label, repr)
  SimilarityPresence similarity_;
  BaselineSlot baseline_;
};

}  // namespace

json merge_results(const std::vector<ResultPart>& parts, const MergeOptions& options) {
  if (parts.empty()) throw Error("", "merge: no result files given");
  Merger merger;
  for (const ResultPart& part : parts) {
    require_same_tool(part, parts.front());
    merger.add(part);
  }
  json document = merger.result(options);
  // The parts' version, not this binary's: the numbers are theirs (all parts share it).
  document["tool"] = tool_of(parts.front());
  return document;
}

}  // namespace kvrank
