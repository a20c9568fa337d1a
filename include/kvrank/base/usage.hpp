// Checks of options given once per input, shared by the command line and the Python module so
// that both say the same.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvrank {

/// An option given once per input, in order (--label, --step, --panel-title): throws the usage
/// error (kvrank::Error) "OPTION given N times for M input(s)" when there are more values than
/// inputs.
void check_given_per_input(std::string_view option, std::size_t given, std::size_t inputs);

}  // namespace kvrank
