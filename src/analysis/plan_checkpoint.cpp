// The converted checkpoint of a plan (plan_checkpoint.hpp). Per planned layer, with the groups in
// the plan's order and the transforms R_k (keys) and R'_k (values) of KV head k:
//   k_proj rows of group g: mean_{k∈g} R_k K_k          v_proj: mean R'_k V_k
//   q_proj rows, query heads reordered group by group: R_k Q_h for h reading k
//   o_proj columns, in the same order: O_h R'_kᵀ
// An R_k within the gauge (RoPE-plane rotations for keys) leaves each head's function unchanged,
// so the written model differs from the original only by the mean-pooling.
#include "kvrank/analysis/plan_checkpoint.hpp"

#include <nlohmann/json.hpp>
#include <random>

#include "io/safetensors_writer.hpp"
#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"

namespace fs = std::filesystem;

namespace kvrank {
namespace {

std::string layer_name(const std::string& pattern, int layer) {
  std::string name = pattern;
  name.replace(name.find("{i}"), 3, std::to_string(layer));
  return name;
}

const DenseTensors& writable_tensors(const Checkpoint& checkpoint, const ModelLayout& layout,
                                     const PlanModel& plan) {
  const std::string path = checkpoint.path().string();
  const auto* dense = std::get_if<DenseTensors>(&layout.tensors);
  auto refuse = [&](const std::string& why) { throw Error(path, "--write-checkpoint: " + why); };
  if (!dense || dense->fused() || dense->orientation != Orientation::out_in)
    refuse("only separate q/k/v/o projections stored [out, in] are written");
  if (dense->q_norm || dense->k_norm || dense->gated_query || dense->input_norm)
    refuse("models with QK norms or gated queries are not written");
  if (plan.layers.size() != attention_layer_list(layout).size())
    refuse("every layer must be planned (drop --layers)");
  for (const PlanLayer& layer : plan.layers)
    for (ProjectionRole role :
         {ProjectionRole::q, ProjectionRole::k, ProjectionRole::v, ProjectionRole::o}) {
      std::string bias = layer_name(dense->names.at(role), layer.layer);
      if (bias.size() > 7 && bias.ends_with(".weight")) bias.replace(bias.size() - 7, 7, ".bias");
      if (checkpoint.find(bias)) refuse("attention biases are not written (" + bias + ")");
    }
  return *dense;
}

/// The original query heads in their new order, and the KV head each reads.
std::vector<int> query_order(const PlanLayer& layer, const std::vector<int>& kv_of_head) {
  std::vector<int> order;
  for (const auto& group : layer.plan.groups)
    for (int k : group)
      for (std::size_t h = 0; h < kv_of_head.size(); ++h)
        if (kv_of_head[h] == k) order.push_back(static_cast<int>(h));
  return order;
}

/// The four converted projections of one layer, by tensor name.
std::map<std::string, RowMatrixF> converted_layer(const Checkpoint& checkpoint,
                                                  const DenseTensors& names,
                                                  const ModelLayout& layout,
                                                  const PlanLayer& layer) {
  const int d = layout.head_dim;
  const int ratio = layout.heads / layout.kv_heads;
  std::vector<int> kv_of_head(layout.heads);
  for (int h = 0; h < layout.heads; ++h) kv_of_head[h] = h / ratio;
  auto read = [&](ProjectionRole role) {
    return to_matrix(checkpoint.at(layer_name(names.names.at(role), layer.layer)))
        .cast<double>()
        .eval();
  };
  const MatrixD q = read(ProjectionRole::q), k = read(ProjectionRole::k),
                v = read(ProjectionRole::v), o = read(ProjectionRole::o);
  const std::size_t groups = layer.plan.groups.size();
  MatrixD new_k = MatrixD::Zero(Index(groups) * d, k.cols());
  MatrixD new_v = MatrixD::Zero(Index(groups) * d, v.cols());
  for (std::size_t g = 0; g < groups; ++g) {
    const auto& members = layer.plan.groups[g];
    // Without --refit the pool of member m is R_m / n; with it, the refit's coefficients.
    const bool refit = !layer.key_pool.empty();
    for (int m : members) {
      const MatrixD& key_pool = refit ? layer.key_pool[m] : layer.key_rotations[m];
      const MatrixD& value_pool = refit ? layer.value_pool[m] : layer.value_rotations[m];
      new_k.middleRows(Index(g) * d, d) += key_pool * k.middleRows(Index(m) * d, d);
      new_v.middleRows(Index(g) * d, d) += value_pool * v.middleRows(Index(m) * d, d);
    }
    const double count = refit ? 1.0 : static_cast<double>(members.size());
    new_k.middleRows(Index(g) * d, d) /= count;
    new_v.middleRows(Index(g) * d, d) /= count;
  }
  MatrixD new_q(q.rows(), q.cols()), new_o(o.rows(), o.cols());
  const std::vector<int> order = query_order(layer, kv_of_head);
  for (std::size_t p = 0; p < order.size(); ++p) {
    const int h = order[p];
    const int kv = kv_of_head[h];
    new_q.middleRows(Index(p) * d, d) = layer.key_rotations[kv] * q.middleRows(Index(h) * d, d);
    new_o.middleCols(Index(p) * d, d) =
        o.middleCols(Index(h) * d, d) * layer.value_rotations[kv].transpose();
  }
  std::map<std::string, RowMatrixF> out;
  out[layer_name(names.names.at(ProjectionRole::q), layer.layer)] = new_q.cast<float>();
  out[layer_name(names.names.at(ProjectionRole::k), layer.layer)] = new_k.cast<float>();
  out[layer_name(names.names.at(ProjectionRole::v), layer.layer)] = new_v.cast<float>();
  out[layer_name(names.names.at(ProjectionRole::o), layer.layer)] = new_o.cast<float>();
  return out;
}

/// A fresh sibling folder for the files, renamed to `folder` once complete.
fs::path staging_folder(const fs::path& folder) {
  std::random_device random;
  const fs::path parent = folder.parent_path().empty() ? fs::path(".") : folder.parent_path();
  return parent / ("." + folder.filename().string() + ".tmp-" + std::to_string(random()));
}

void write_files(const Checkpoint& checkpoint, const PlanModel& plan,
                 const std::map<std::string, RowMatrixF>& converted, const fs::path& staging) {
  std::vector<TensorSpec> specs;
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (tensor.dtype != DType::F32 && tensor.dtype != DType::BF16 && tensor.dtype != DType::F16)
      throw Error(checkpoint.path().string(), tensor.name,
                  "--write-checkpoint writes float32, bfloat16 and float16 tensors only");
    const auto found = converted.find(tensor.name);
    std::vector<std::int64_t> shape = tensor.shape;
    if (found != converted.end()) shape = {found->second.rows(), found->second.cols()};
    specs.push_back({tensor.name, tensor.dtype, shape});
  }
  SafetensorsWriter writer(staging / "model.safetensors", specs);
  for (const TensorView& tensor : checkpoint.tensors()) {
    const auto found = converted.find(tensor.name);
    if (found != converted.end()) {
      writer.write(tensor.name, {found->second.data(), std::size_t(found->second.size())});
    } else {
      const std::vector<float> values = to_f32(tensor);
      writer.write(tensor.name, values);
    }
  }
  writer.close();
  nlohmann::json config = checkpoint.config().value_or(nlohmann::json::object());
  config["num_key_value_heads"] = plan.kv_heads_after;
  write_file_atomically(staging / "config.json", config.dump(2) + "\n");
}

}  // namespace

void write_planned_checkpoint(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                              const PlanModel& plan, const fs::path& folder) {
  const ModelLayout layout = detect_layout(checkpoint, overrides);
  const DenseTensors& names = writable_tensors(checkpoint, layout, plan);
  std::error_code error;
  if (fs::exists(folder, error) && !(fs::is_directory(folder) && fs::is_empty(folder)))
    throw Error(folder.string(), "--write-checkpoint: the folder exists and is not empty");
  std::map<std::string, RowMatrixF> converted;
  for (const PlanLayer& layer : plan.layers)
    converted.merge(converted_layer(checkpoint, names, layout, layer));
  const fs::path staging = staging_folder(folder);
  try {
    fs::create_directories(staging);
    write_files(checkpoint, plan, converted, staging);
    if (fs::exists(folder)) fs::remove(folder);
    fs::rename(staging, folder);
  } catch (const fs::filesystem_error& failure) {
    fs::remove_all(staging, error);
    throw Error(folder.string(), std::string("--write-checkpoint: ") + failure.code().message());
  } catch (...) {
    fs::remove_all(staging, error);
    throw;
  }
}

}  // namespace kvrank
