// kvrank — the command line: parse → request → run → print. The subcommands come from one table
// (subcommands.hpp); each declares its options into a request of the application layer
// (kvrank/app/), which validates, runs and writes it. This file maps errors to exit codes:
//   0 success · 1 `check` found a change beyond tolerance · 2 invalid input or usage (nothing
//   usable) · 3 internal error · 4 `analyze --keep-going`: some inputs failed, the others written
//   (docs/result-format.md).

#include <CLI/CLI.hpp>
#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/app/requests.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/heap.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/base/version.hpp"
#include "option_kinds.hpp"
#include "subcommands.hpp"
#include "suggest.hpp"
#include "terminal.hpp"

using namespace kvrank::cli;

namespace {

constexpr std::size_t kUsageMessageBytes = 300;

/// Runs before any library's constructor: OpenBLAS maps a buffer per thread in its own and retries
/// forever when that fails, so under a memory limit the thread count is fitted before it runs.
[[gnu::section(".preinit_array"),
  gnu::used]] void (*fit_threads_before_libraries)(int, char**,
                                                   char**) = kvrank::fit_library_threads_at_start;

/// The line for a CLI11 parse error: "did you mean" for an unknown option, else CLI11's message,
/// cut like any quoted value (`--format` with 8 MB).
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr)
    if (const auto line = unknown_option(app)) return *line;
  return kvrank::excerpt(error.what(), kUsageMessageBytes);
}

/// Parses, then runs the subcommand chosen. Throws what parsing and the run throw.
int parse_and_run(CLI::App& app, int argc, char** argv,
                  const std::vector<std::pair<CLI::App*, Runner>>& commands) {
  bool quiet = false;
  int verbose = 0;
  app.add_flag("-q,--quiet", quiet, "Only errors and warnings on stderr, no progress bar");
  app.add_flag("-v,--verbose", verbose, "More detail on stderr");
  app.parse(argc, argv);
  configure_logging(quiet ? -1 : verbose);
  for (const auto& [command, run] : commands)
    if (command->parsed()) return run();
  return kvrank::app::kExitInternal;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvrank::app;
  kvrank::reuse_freed_memory();  // layer after layer, the same large buffers (heap.hpp)
  CLI::App app{"kvrank — how many effectively different attention heads each layer has"};
  app.set_version_flag("--version", "kvrank " + std::string(kvrank::version()));
  app.require_subcommand(1);
  app.fallthrough();  // -q and -v also work after the subcommand
  std::vector<std::pair<CLI::App*, Runner>> commands;
  for (const Subcommand& row : subcommands()) {
    CLI::App* command = app.add_subcommand(row.name, row.summary);
    commands.emplace_back(command, row.declare(*command));
  }
  refuse_empty_values(app);

  if (argc < 2) {  // bare `kvrank`: what it does and where to look, not a parse error
    print_error("no subcommand given: kvrank " + subcommand_names("|") +
                " (kvrank --help lists them, kvrank SUBCOMMAND --help their options)");
    return kExitInvalidInput;
  }
  if (const auto unknown = unknown_subcommand(argc, argv)) {
    print_error(*unknown);
    return kExitInvalidInput;
  }
  try {
    return parse_and_run(app, argc, argv, commands);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(parse_error_line(app, e));
    return kExitInvalidInput;
  } catch (const kvrank::Error& e) {
    print_error(e.what());
    return kExitInvalidInput;
  } catch (const std::bad_alloc&) {  // the input needs more memory than this process may have
    print_error(kvrank::out_of_memory_message());
    return kExitInvalidInput;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitInternal;
  }
}
