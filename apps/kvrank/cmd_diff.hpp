// `kvrank diff A B` on the command line: its options, and the run that calls diff_models
// (analysis/diff.hpp) and writes the comparison. main.cpp registers it with one object.
#pragma once

#include <string>
#include <vector>

#include "commands.hpp"

namespace kvrank::cli {

struct DiffArgs {
  std::string a;
  std::string b;
  std::vector<std::string> labels;
  std::string repr;  ///< empty: qk and ov (k and v for K/V-only inputs)
  std::string attention = "all";
  std::string layers;
  std::string format;  ///< empty: from -o's extension, else table
  std::string output;
  int top = 10;        ///< the heads that moved most, listed in the table and JSON
  std::string figure;  ///< layers × heads heatmap of head_similarity (.svg, .png, .pdf)
  LayoutFlags layout;
};

/// The `diff` subcommand: constructed with the app (adds the subcommand and its options), then
/// `if (diff.parsed()) return diff.run();` after parsing.
class DiffCommand {
 public:
  explicit DiffCommand(CLI::App& app);
  DiffCommand(const DiffCommand&) = delete;  // the options point into args_
  DiffCommand& operator=(const DiffCommand&) = delete;

  bool parsed() const;
  int run() const;

 private:
  DiffArgs args_;
  CLI::App* command_ = nullptr;
};

}  // namespace kvrank::cli
