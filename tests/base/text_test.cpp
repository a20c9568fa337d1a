// Tests of text.hpp: strict UTF-8 decoding and the terminal escaping used by every message
// (names from files are escaped wherever they meet a terminal: docs/choices.md).
#include "kvrank/base/text.hpp"

#include <string>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

TEST_CASE("decode_utf8 decodes one to four byte characters", "[text]") {
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80";  // a é 中 😀
  CHECK(decode_utf8(text, 0).code_point == U'a');
  const Utf8Char e_acute = decode_utf8(text, 1);
  CHECK((e_acute.valid && e_acute.length == 2 && e_acute.code_point == 0xE9));
  const Utf8Char zhong = decode_utf8(text, 3);
  CHECK((zhong.valid && zhong.length == 3 && zhong.code_point == 0x4E2D));
  const Utf8Char smile = decode_utf8(text, 6);
  CHECK((smile.valid && smile.length == 4 && smile.code_point == 0x1F600));
}

TEST_CASE("decode_utf8 rejects ill-formed sequences one byte at a time", "[text]") {
  const char* const cases[] = {
      "\xff",              // never in UTF-8
      "\x80",              // a lone continuation byte
      "\xc0\xaf",          // overlong '/'
      "\xe0\x80\xaf",      // overlong, three bytes
      "\xed\xa0\x80",      // a surrogate (U+D800)
      "\xf4\x90\x80\x80",  // above U+10FFFF
      "\xe2\x82",          // truncated
      "\xe2\x28\xa1",      // second byte not a continuation
  };
  for (const char* text : cases) {
    const Utf8Char c = decode_utf8(text, 0);
    CHECK_FALSE(c.valid);
    CHECK(c.length == 1);
    CHECK(c.code_point == static_cast<unsigned char>(text[0]));
  }
}

TEST_CASE("printable escapes what a terminal would act on", "[text]") {
  CHECK(printable("layers.0\n.q_proj") == "layers.0\\n.q_proj");
  CHECK(printable("\x1b[2J\x1b]0;title\x07") == "\\x1b[2J\\x1b]0;title\\x07");
  CHECK(printable("a\rb\tc\x7f") == "a\\rb\\tc\\x7f");
  CHECK(printable("\xc2\x85next") == "\\u{0085}next");  // C1 NEL
  CHECK(printable("abc\xe2\x80\xae"
                  "cba") == "abc\\u{202e}cba");         // right-to-left override
  CHECK(printable("x\xe2\x80\xa8y") == "x\\u{2028}y");  // line separator
  CHECK(printable("m\xff\xfe.safetensors") == "m\\xff\\xfe.safetensors");
  CHECK(printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
}

TEST_CASE("printable keeps valid text, including non-ASCII and the backslash", "[text]") {
  const std::string text = "Modèle 中文 😀 C:\\models — erank";
  CHECK(printable(text) == text);
  CHECK(printable("") == "");
}

TEST_CASE("printable is idempotent", "[text]") {
  const std::string once = printable("a\n\x1b\xff\xe2\x80\xae\\x41");
  CHECK(printable(once) == once);
}

TEST_CASE("Error messages are one printable line however the names look", "[text][error]") {
  const Error error("ckpt\n/model.safetensors", "layers.0.\x1b[31mq_proj", "bad\rshape");
  CHECK(std::string(error.what()) ==
        "ckpt\\n/model.safetensors: layers.0.\\x1b[31mq_proj: bad\\rshape");
  CHECK(error.tensor() == "layers.0.\x1b[31mq_proj");  // the raw name stays available
  const Error rethrown("", error.what());
  CHECK(std::string(rethrown.what()) == std::string(error.what()));
}

TEST_CASE("excerpt quotes at most 60 bytes of a value, cut at a character boundary", "[text]") {
  CHECK(excerpt("short") == "short");
  CHECK(excerpt(std::string(60, 'a')) == std::string(60, 'a'));
  CHECK(excerpt(std::string(8 << 20, 'a')) == std::string(60, 'a') + "... (8388608 bytes)");
  // "é" is two bytes: a cut at byte 3 of "aéé" would split the second one.
  CHECK(excerpt("a\xc3\xa9\xc3\xa9", 4) == "a\xc3\xa9... (5 bytes)");
  // Escaped like every message: a newline in the value cannot forge a second line.
  CHECK(excerpt("a\nb") == "a\\nb");
  // The bound is on what is shown: escapes expand, so 60 DEL bytes show as fifteen "\x7f".
  std::string escapes;
  for (int i = 0; i < 15; ++i) escapes += "\\x7f";
  CHECK(excerpt(std::string(60, '\x7f')) == escapes + "... (60 bytes)");
  CHECK(excerpt(std::string(1000, '\x7f')).size() <= 60 + std::string("... (1000 bytes)").size());
}

TEST_CASE("ascii_lower lowers ASCII letters only", "[text]") {
  CHECK(ascii_lower(".JSON") == ".json");
  CHECK(ascii_lower("Out.Svg") == "out.svg");
  CHECK(ascii_lower("\xC3\x89.PNG") == "\xC3\x89.png");  // UTF-8 bytes stay as they are
}

}  // namespace
}  // namespace kvrank
