// Catch2 shim: Debian 12 ships Catch2 2.13 (single header); Catch2 v3 splits it up.
#pragma once
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#include <cstddef>
#include <string>
#define KVRANK_CATCH_V3 1
using Catch::Approx;

namespace Catch::Matchers {
// v3 renamed the substring matcher ContainsSubstring; its Contains matches an element of a range.
// The tests use v2's Contains on text (string literals and std::string temporaries): these
// overloads, more specific than v3's templates, keep v2's meaning. A std::string lvalue still
// reaches v3's element matcher and fails to compile, never silently matching something else.
template <std::size_t N>
auto Contains(const char (&text)[N], CaseSensitive sensitivity = CaseSensitive::Yes) {
  return ContainsSubstring(text, sensitivity);
}
inline auto Contains(std::string&& text, CaseSensitive sensitivity = CaseSensitive::Yes) {
  return ContainsSubstring(text, sensitivity);
}
}  // namespace Catch::Matchers
#else
#include <catch2/catch.hpp>
#endif
