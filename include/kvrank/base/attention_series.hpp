// Which attention of a model a series of results measures: the stack (encoder, decoder, or the text
// and vision towers of a dual encoder) and the kind (self- or cross-attention). Encoders and
// encoder-decoders (bert, t5, whisper, clip …; docs/families.md) have one series per stack and
// kind; decoder-only models have a single self-attention series and leave it unnamed (results then
// carry no "attention" field). Shared by layout detection and the result model, hence in base.
//
//   AttentionSeries cross{AttentionStack::decoder, AttentionKind::cross};
//   std::string text = series_text(cross);                         // "decoder cross"
//   std::optional<AttentionStack> vision = stack_named("vision");  // AttentionStack::vision
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvrank {

enum class AttentionStack { encoder, decoder, text, vision };
enum class AttentionKind { self, cross };

struct AttentionSeries {
  AttentionStack stack = AttentionStack::encoder;
  AttentionKind kind = AttentionKind::self;

  bool operator==(const AttentionSeries&) const = default;
};

std::string_view stack_name(AttentionStack stack) noexcept;
std::optional<AttentionStack> stack_named(std::string_view name) noexcept;
/// "encoder, decoder, text or vision".
std::string stack_list();
std::string_view kind_name(AttentionKind kind) noexcept;
std::optional<AttentionKind> kind_named(std::string_view name) noexcept;
/// "self or cross".
std::string kind_list();
/// "decoder cross": the stack, a space, the kind (the label suffix's text).
std::string series_text(const AttentionSeries& series);

}  // namespace kvrank
