// `kvrank plan`: arguments to PlanOptions, one plan per checkpoint, one writer.
#include "cmd_plan.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>

#include "kvrank/analysis/plan.hpp"
#include "kvrank/analysis/plan_checkpoint.hpp"
#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank::cli {
namespace {

struct PlanArgs {
  std::vector<std::string> paths;
  std::vector<std::string> labels;
  std::string kv_heads;
  std::string gauge = "auto";
  std::string objective = "qk";
  std::string rope;
  std::string layers;
  std::string format;
  std::string output;
  std::string write_checkpoint;
  std::optional<double> latent_energy;
  std::string random = "32";
  std::string seed = "0";
  std::string family;
};

PlanArgs& args() {
  static PlanArgs parsed;
  return parsed;
}

/// A decimal integer in [low, high] (no sign other than '-', no hex, no clamping).
long long decimal_option(const std::string& name, const std::string& text, long long low,
                         long long high) {
  const std::string range =
      " (a decimal integer in " + std::to_string(low) + "-" + std::to_string(high) + ")";
  std::size_t digits = text.size() > 0 && text[0] == '-' ? 1 : 0;
  if (digits == text.size() || text.size() > 19 ||
      text.find_first_not_of("0123456789", digits) != std::string::npos)
    throw Error("", name + " " + text + " is not a decimal integer" + range);
  const long long value = std::stoll(text);
  if (value < low || value > high) throw Error("", name + " " + text + " out of range" + range);
  return value;
}

std::string format_of(const PlanArgs& a) {
  const std::string extension = std::filesystem::path(a.output).extension().string();
  const std::string named = extension == ".json" ? "json" : extension == ".csv" ? "csv" : "";
  if (!named.empty() && !a.format.empty() && a.format != named)
    throw Error("", "--format " + a.format + " contradicts -o " + a.output);
  if (!named.empty()) return named;
  return a.format.empty() ? "table" : a.format;
}

PlanOptions plan_options(const PlanArgs& a) {
  PlanOptions options;
  options.kv_heads_after = static_cast<int>(decimal_option("--kv-heads", a.kv_heads, 1, 1 << 20));
  options.align = a.gauge == "auto";
  options.objective = parse_plan_objective(a.objective);
  if (!a.rope.empty()) options.rope = parse_rope_convention(a.rope);
  options.layers = a.layers;
  options.latent_energy = a.latent_energy;
  options.random_partitions = static_cast<int>(decimal_option("--random", a.random, 1, 100000));
  options.seed = static_cast<std::uint64_t>(decimal_option("--seed", a.seed, 0, 1LL << 62));
  return options;
}

}  // namespace

CLI::App* add_plan(CLI::App& app) {
  PlanArgs& a = args();
  auto* command = app.add_subcommand(
      "plan", "Plan an MHA/GQA → GQA conversion: which KV heads to merge, aligned (docs/plan.md)");
  command->add_option("paths", a.paths, "Checkpoints")->required();
  command->add_option("--label", a.labels, "Label of each model, in order (default: its name)");
  command->add_option("--kv-heads", a.kv_heads, "KV heads after the conversion (G)")->required();
  command->add_option("--gauge", a.gauge, "Align heads before merging (auto) or not (none)")
      ->check(CLI::IsMember({"auto", "none"}))
      ->capture_default_str();
  command
      ->add_option("--objective", a.objective,
                   "merge: minimise key_error + value_error; qk: minimise qk_error")
      ->check(CLI::IsMember({"merge", "qk"}))
      ->capture_default_str();
  command->add_option("--rope", a.rope,
                      "RoPE convention: rotate_half, interleaved or none (default: the model "
                      "type's)");
  command->add_option("--layers", a.layers, "Layers to plan, e.g. 0-11,20 (default: all)");
  command->add_option("--format", a.format, "table, json or csv (default: from -o, else table)")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  command->add_option("-o,--output", a.output, "Write to FILE (atomically; default: stdout)");
  command->add_option("--write-checkpoint", a.write_checkpoint,
                      "Write the converted model (safetensors, G KV heads) to DIR");
  command->add_option("--latent-energy", a.latent_energy,
                      "Also give latent_rank and latent_rank_forms at this energy, in (0, 1]");
  command->add_option("--random", a.random, "Random partitions for the baseline median")
      ->capture_default_str();
  command->add_option("--seed", a.seed, "Seed of the random partitions and the local search")
      ->capture_default_str();
  command->add_option("--family", a.family, "Force the family or model type (as analyze)");
  return command;
}

int run_plan() {
  const PlanArgs& a = args();
  const PlanOptions options = plan_options(a);
  const std::string format = format_of(a);
  if (a.labels.size() > a.paths.size()) throw Error("", "more --label than checkpoints");
  if (!a.write_checkpoint.empty() && a.paths.size() != 1)
    throw Error("", "--write-checkpoint takes one checkpoint");
  std::vector<std::filesystem::path> inputs(a.paths.begin(), a.paths.end());
  std::optional<OutputFile> file;
  if (!a.output.empty() && a.output != "-") file.emplace(a.output, inputs);
  LayoutOverrides overrides;
  if (!a.family.empty()) overrides.family = a.family;
  std::vector<PlanModel> models;
  for (std::size_t i = 0; i < a.paths.size(); ++i) {
    const Checkpoint checkpoint = Checkpoint::open(a.paths[i]);
    models.push_back(
        plan_checkpoint(checkpoint, overrides, options, i < a.labels.size() ? a.labels[i] : ""));
    if (!a.write_checkpoint.empty())
      write_planned_checkpoint(checkpoint, overrides, models.back(), a.write_checkpoint);
  }
  const std::string text = format == "json"  ? plan_json(models)
                           : format == "csv" ? plan_csv(models)
                                             : plan_table(models);
  if (!file) {
    write_stdout(text);
  } else {
    file->write(text);
    file->commit();
  }
  return 0;
}

}  // namespace kvrank::cli
