// The table of subcommands (subcommands.hpp) and how each runs on a terminal.
#include "subcommands.hpp"

#include "kvrank/app/commands.hpp"
#include "terminal.hpp"

namespace kvrank::cli {

const std::vector<Subcommand>& subcommands() {
  static const std::vector<Subcommand> table{
      subcommand("analyze", "Per-layer effective rank of attention heads", declare_analyze,
                 run_analyze),
      subcommand("inspect", "List tensors and the detected family/variant/heads", declare_inspect,
                 run_inspect),
      subcommand("check", "Compare rank curves with a golden file (exit 1 when one changed)",
                 declare_check, run_check),
      subcommand("plot",
                 "Draw rank curves (one panel per file and representation), or a plan file's "
                 "errors and ranks, as SVG, PNG or PDF",
                 declare_plot, run_plot),
      subcommand("merge",
                 "Join result files of parts of one run (array tasks, layer shards) into one",
                 declare_merge, run_merge),
      subcommand("baseline", "The fully-redundant series (1.0 at every layer)", declare_baseline,
                 run_baseline),
      subcommand("diff",
                 "What changed between two checkpoints of one shape: per-layer metrics, and how "
                 "far each head moved (docs/diff.md)",
                 declare_diff, run_diff),
      subcommand("plan",
                 "Plan an MHA/GQA -> GQA conversion: which key/value heads to merge, aligned "
                 "(docs/plan.md)",
                 declare_plan, run_plan),
      subcommand("synth", "Write a seeded test checkpoint of any family/variant", declare_synth,
                 run_synth),
  };
  return table;
}

int run_analyze(const AnalyzeCommand& options) {
  Progress progress(progress_mode(options.progress));
  return app::run_analyze(options.request, terminal_hooks(&progress));
}

int run_inspect(const app::InspectRequest& request) {
  return app::run_inspect(request, terminal_hooks());
}

int run_check(const app::CheckRequest& request) {
  return app::run_check(request, terminal_hooks());
}

int run_plot(const app::PlotRequest& request) { return app::run_plot(request, terminal_hooks()); }

int run_merge(const app::MergeRequest& request) {
  return app::run_merge(request, terminal_hooks());
}

int run_baseline(const app::BaselineRequest& request) {
  return app::run_baseline(request, terminal_hooks());
}

int run_synth(const app::SynthRequest& request) {
  return app::run_synth(request, terminal_hooks());
}

int run_diff(const app::DiffRequest& request) { return app::run_diff(request, terminal_hooks()); }

int run_plan(const app::PlanRequest& request) { return app::run_plan(request, terminal_hooks()); }

}  // namespace kvrank::cli
