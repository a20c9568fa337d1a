// The kinds of command-line options (option_kinds.hpp).
#include "option_kinds.hpp"

#include <algorithm>
#include <limits>

#include "kvrank/base/name_table.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank::cli {
namespace {

/// The name an option goes by in messages: its first long name ("--threads"), else its first.
std::string option_label(const std::string& names) {
  std::string first;
  for (std::size_t start = 0; start <= names.size();) {
    const std::size_t comma = std::min(names.find(',', start), names.size());
    const std::string name = names.substr(start, comma - start);
    if (name.rfind("--", 0) == 0) return name;
    if (first.empty()) first = name;
    start = comma + 1;
  }
  return first;
}

template <typename Int>
Int parse_as(const std::string& option, const std::string& text) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  const auto max = std::numeric_limits<Int>::max();
  const std::int64_t top = static_cast<std::uint64_t>(max) > static_cast<std::uint64_t>(kMax)
                               ? kMax
                               : static_cast<std::int64_t>(max);
  return static_cast<Int>(
      parse_integer(option, text, static_cast<std::int64_t>(std::numeric_limits<Int>::min()), top));
}

}  // namespace

template <typename Int>
CLI::Option* add_integer(CLI::App& command, const std::string& names, Int& target,
                         const std::string& help, bool show_default) {
  const std::string label = option_label(names);
  auto* option = command.add_option_function<std::string>(
      names, [&target, label](const std::string& text) { target = parse_as<Int>(label, text); },
      help);
  option->type_name("INT");
  if (show_default) option->default_str(std::to_string(target));
  return option;
}

template CLI::Option* add_integer(CLI::App&, const std::string&, int&, const std::string&, bool);
template CLI::Option* add_integer(CLI::App&, const std::string&, std::uint64_t&, const std::string&,
                                  bool);

CLI::Option* add_integer(CLI::App& command, const std::string& names, std::optional<int>& target,
                         const std::string& help) {
  const std::string label = option_label(names);
  return command
      .add_option_function<std::string>(
          names, [&target, label](const std::string& text) { target = parse_as<int>(label, text); },
          help)
      ->type_name("INT");
}

CLI::Option* add_integer_list(CLI::App& command, const std::string& names,
                              std::vector<std::int64_t>& target, const std::string& help) {
  const std::string label = option_label(names);
  return command
      .add_option_function<std::vector<std::string>>(
          names,
          [&target, label](const std::vector<std::string>& texts) {
            for (const std::string& text : texts)
              target.push_back(parse_as<std::int64_t>(label, text));
          },
          help)
      ->type_name("INT");
}

std::string comma_list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

CLI::Option* add_choice(CLI::App& command, const std::string& names,
                        const std::vector<std::string>& choices, const std::string& help,
                        std::function<void(const std::string&)> apply) {
  return command.add_option_function<std::string>(names, std::move(apply), help)
      ->type_name("TEXT:{" + comma_list(choices) + "}");
}

CLI::Validator one_of(const std::vector<std::string>& choices) {
  return CLI::Validator(
      [choices](std::string& value) {
        if (std::find(choices.begin(), choices.end(), value) != choices.end()) return std::string();
        return "expected " + name_list(choices) + ", found \"" + excerpt(value) + "\"";
      },
      "{" + comma_list(choices) + "}", "ONE-OF");  // the help's TEXT:{a,b,c}, as IsMember's
}

/// An empty value is a value: `--layer-shard "$TASK"` with TASK unset must not read as "no option"
/// (it silently analysed every layer). Every option taking a value refuses "", except a title.
void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& value) {
        return value.empty() ? std::string("empty value (an unset variable?)") : std::string();
      },
      "", "NON-EMPTY");
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size_max() > 0 && option->get_name() != "--title")
      option->check(non_empty);
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*command);
}

}  // namespace kvrank::cli
