// "Did you mean" (suggest.hpp).
#include "suggest.hpp"

#include <vector>

#include "kvrank/base/text.hpp"

namespace kvrank::cli {
namespace {

std::vector<std::string> names_of_subcommands() {
  std::vector<std::string> names;
  for (const Subcommand& row : subcommands()) names.push_back(row.name);
  return names;
}

/// Every name an option of `command` goes by: --long and -s.
void add_option_names(const CLI::App& command, std::vector<std::string>& names) {
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
}

/// The subcommand the arguments named, or nullptr.
const CLI::App* chosen_subcommand(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands({}))
    if (command->parsed()) return command;
  return nullptr;
}

}  // namespace

std::string subcommand_names(const char* separator) {
  std::string text;
  for (const Subcommand& row : subcommands()) text += (text.empty() ? "" : separator) + row.name;
  return text;
}

std::optional<std::string> unknown_subcommand(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word.front() == '-') continue;  // -q, -v, --help: the top level's flags
    const std::vector<std::string> names = names_of_subcommands();
    for (const std::string& name : names)
      if (word == name) return std::nullopt;
    const std::string head = "unknown subcommand \"" + excerpt(word) + "\"";
    if (const auto nearest = nearest_name(word, names))
      return head + " (did you mean " + *nearest + "?)";
    return head + ": expected " + subcommand_names("|") + " (kvrank --help lists them)";
  }
  return std::nullopt;
}

std::optional<std::string> unknown_option(const CLI::App& app) {
  const CLI::App* command = chosen_subcommand(app);
  std::vector<std::string> names;
  add_option_names(app, names);
  if (command) add_option_names(*command, names);
  const std::string where = command ? " of " + command->get_name() : std::string();
  const std::string help = command ? "kvrank " + command->get_name() + " --help" : "kvrank --help";
  for (const std::string& argument : app.remaining(true)) {
    if (argument.size() < 2 || argument.front() != '-') continue;
    const std::string name = argument.substr(0, argument.find('='));
    const std::string head = "unknown option " + excerpt(name) + where;
    if (const auto nearest = nearest_name(name, names))
      return head + " (did you mean " + *nearest + "?)";
    return head + " (" + help + " lists them)";
  }
  return std::nullopt;
}

}  // namespace kvrank::cli
