// A forgiving command line: a mistyped subcommand or option is answered with the name it was
// probably meant to be ("did you mean"), by edit distance (text.hpp's nearest_name).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "subcommands.hpp"

namespace kvrank::cli {

/// The error line for a first word that names no subcommand (`kvrank analyse`), naming the
/// nearest one or listing them all; nullopt when the first word is a subcommand (or absent).
std::optional<std::string> unknown_subcommand(int argc, const char* const* argv);

/// The error line for arguments `app` did not expect (CLI::ExtrasError): an unknown option of the
/// subcommand given, with the nearest option name when one is close; nullopt when no unexpected
/// argument looks like an option (CLI11's own message is kept then).
std::optional<std::string> unknown_option(const CLI::App& app);

/// "analyze|inspect|…": the subcommands' names.
std::string subcommand_names(const char* separator);

}  // namespace kvrank::cli
