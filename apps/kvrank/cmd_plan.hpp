// `kvrank plan`: the conversion plan of issue 35 (docs/plan.md). Registered by main.cpp like the
// other subcommands; the arguments live in cmd_plan.cpp.
#pragma once

namespace CLI {
class App;
}

namespace kvrank::cli {

/// Adds the `plan` subcommand to `app` and returns it.
CLI::App* add_plan(CLI::App& app);
/// Runs the parsed `plan` subcommand; returns the exit code.
int run_plan();

}  // namespace kvrank::cli
