// Closed sets of names — families, variants, metrics, projection roles — as enums, each with one
// table of {value, name} listed in the enum's order (as dtype.cpp's DType table), and the lookups
// over such a table. A name read from a user (a flag, a map file, a result file) becomes a value
// here or an error that lists the names; nothing downstream compares strings.
//
//   enum class Colour { red, green };
//   constexpr std::array<Named<Colour>, 2> kColours{{{Colour::red, "red"}, {Colour::green, "g"}}};
//   static_assert(in_enum_order(kColours));
//   std::string_view green = name_of(kColours, Colour::green);  // "g"
//   std::optional<Colour> red = value_named(kColours, "red");   // Colour::red
//   std::string both = name_list(kColours);                     // "red or g"
//   std::string same = name_list(names_of(kColours));           // "red or g"
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <array>
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/base/text.hpp"  // excerpt

namespace kvrank {

template <typename Enum>
struct Named {
  Enum value;
  std::string_view name;
};

/// Whether row i of `table` has the enum's value i in `field` (what name_of relies on); tables
/// with more columns than Named pass their enum column.
template <typename Row, std::size_t N, typename Enum>
constexpr bool in_enum_order(const std::array<Row, N>& table, Enum Row::*field) {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(table[i].*field) != i) return false;
  }
  return true;
}

template <typename Enum, std::size_t N>
constexpr bool in_enum_order(const std::array<Named<Enum>, N>& table) {
  return in_enum_order(table, &Named<Enum>::value);
}

template <typename Enum, std::size_t N>
constexpr std::string_view name_of(const std::array<Named<Enum>, N>& table, Enum value) {
  return table[static_cast<std::size_t>(value)].name;
}

/// The value in `field` of the row called `name`; tables with more columns than Named pass their
/// enum column.
template <typename Row, std::size_t N, typename Enum>
constexpr std::optional<Enum> value_named(const std::array<Row, N>& table, std::string_view name,
                                          Enum Row::*field) {
  for (const Row& row : table) {
    if (row.name == name) return row.*field;
  }
  return std::nullopt;
}

template <typename Enum, std::size_t N>
constexpr std::optional<Enum> value_named(const std::array<Named<Enum>, N>& table,
                                          std::string_view name) {
  return value_named(table, name, &Named<Enum>::value);
}

/// The names of a table, in order (help texts list them).
template <typename Row, std::size_t N>
std::vector<std::string> names_of(const std::array<Row, N>& table) {
  std::vector<std::string> names;
  for (const Row& row : table) names.emplace_back(row.name);
  return names;
}

/// The name of a table's row; a list of names (names_of's) holds the names themselves.
template <typename Row>
std::string_view row_name(const Row& row) {
  return row.name;
}
inline std::string_view row_name(const std::string& name) { return name; }

/// "a, b or c": the names of a table (of Named or of any rows with a `name`) or a list of names,
/// for error messages and help texts.
template <typename Rows>
std::string name_list(const Rows& rows, std::string_view last_separator = " or ") {
  std::string text;
  std::size_t i = 0;
  for (const auto& row : rows) {
    if (i > 0) text += i + 1 == std::size(rows) ? last_separator : ", ";
    text += row_name(row);
    ++i;
  }
  return text;
}

/// "expected a, b or c, found "x"": the rule an option taking one of `table`'s names states when
/// given another (the message reads "OPTION: expected …, found …").
template <typename Row, std::size_t N>
std::string expected_name(const std::array<Row, N>& table, std::string_view found) {
  return "expected " + name_list(table) + ", found \"" + excerpt(found) + "\"";
}

}  // namespace kvrank
