// The name tables of attention_series.hpp.
#include "kvrank/base/attention_series.hpp"

#include <array>

#include "kvrank/base/name_table.hpp"

namespace kvrank {
namespace {

constexpr std::array<Named<AttentionStack>, 4> kStacks{{{AttentionStack::encoder, "encoder"},
                                                        {AttentionStack::decoder, "decoder"},
                                                        {AttentionStack::text, "text"},
                                                        {AttentionStack::vision, "vision"}}};
static_assert(in_enum_order(kStacks));

constexpr std::array<Named<AttentionKind>, 2> kKinds{
    {{AttentionKind::self, "self"}, {AttentionKind::cross, "cross"}}};
static_assert(in_enum_order(kKinds));

}  // namespace

std::string_view stack_name(AttentionStack stack) noexcept { return name_of(kStacks, stack); }
std::optional<AttentionStack> stack_named(std::string_view name) noexcept {
  return value_named(kStacks, name);
}
std::string stack_list() { return name_list(kStacks); }

std::string_view kind_name(AttentionKind kind) noexcept { return name_of(kKinds, kind); }
std::optional<AttentionKind> kind_named(std::string_view name) noexcept {
  return value_named(kKinds, name);
}
std::string kind_list() { return name_list(kKinds); }

std::string series_text(const AttentionSeries& series) {
  return std::string(stack_name(series.stack)) + " " + std::string(kind_name(series.kind));
}

}  // namespace kvrank
