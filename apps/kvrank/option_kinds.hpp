// The kinds of command-line options, each declared one way: integers (decimal, range-checked by
// text.hpp's parse_integer), choices whose names come from a library table, and the refusal of
// empty values. The rules a value must meet are the request's (kvrank/app/requests.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kvrank::cli {

/// An integer option read into `target` (int, std::int64_t, std::uint64_t), decimal only.
/// `show_default`: the help shows the value `target` holds now.
template <typename Int>
CLI::Option* add_integer(CLI::App& command, const std::string& names, Int& target,
                         const std::string& help, bool show_default = false);

CLI::Option* add_integer(CLI::App& command, const std::string& names, std::optional<int>& target,
                         const std::string& help);

/// An integer given once per input (--step): each value appended to `target`.
CLI::Option* add_integer_list(CLI::App& command, const std::string& names,
                              std::vector<std::int64_t>& target, const std::string& help);

/// An option whose value is one of `choices` (the help shows them as TEXT:{a,b}): `apply` parses
/// it into the request, with the library's message for a name it does not know.
CLI::Option* add_choice(CLI::App& command, const std::string& names,
                        const std::vector<std::string>& choices, const std::string& help,
                        std::function<void(const std::string&)> apply);

/// A check that the value is one of `choices`, worded as the library's name errors ("--X: expected
/// a, b or c, found "…"") where CLI11's IsMember would say "… not in {a,b,c}"; for options the
/// front end keeps (the choice is its own, not a request's).
CLI::Validator one_of(const std::vector<std::string>& choices);

/// Refuses "" for every option taking a value (an unset shell variable), except --title.
void refuse_empty_values(CLI::App& app);

/// "a,b,c": `names` as a comma list takes them (the choices and defaults shown in help texts).
std::string comma_list(const std::vector<std::string>& names);

}  // namespace kvrank::cli
