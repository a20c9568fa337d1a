// Encoders and encoder-decoders (layout.hpp detect_series): one dense layout per attention series,
// found by the Hugging Face names tests/writers/write_encoder_checkpoints.py writes; `--attention`
// parsing; the series in the result files (result_files.hpp). The numbers themselves are checked
// against scripts/reference.py in tests/e2e/test_encoder_families.py.
#include <string>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/layout/model_type.hpp"
#include "kvrank/report/result_files.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

/// A checkpoint of `model_type` written by the numpy writer into `dir`.
std::filesystem::path write_encoder(const test::TempDir& dir, const std::string& model_type) {
  const std::filesystem::path out = dir.path() / model_type;
  const auto result = test::run_test_writer("write_encoder_checkpoints.py",
                                            model_type + " " + out.string() + " --seed 3");
  REQUIRE(result.exit_code == 0);
  return out;
}

struct Expected {
  AttentionSeries series;
  int heads, head_dim, d_model, num_layers;
  std::string key;  ///< the key projection's template
};

void check_series(const std::vector<ModelLayout>& layouts, const std::vector<Expected>& expected,
                  Family family) {
  REQUIRE(layouts.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const ModelLayout& layout = layouts[i];
    INFO(expected[i].key);
    CHECK(layout.family == family);
    CHECK(layout.attention == expected[i].series);
    CHECK(layout.variant == Variant::mha);
    CHECK(layout.kv_heads == layout.heads);
    CHECK(layout.heads == expected[i].heads);
    CHECK(layout.head_dim == expected[i].head_dim);
    CHECK(layout.d_model == expected[i].d_model);
    CHECK(layout.num_layers == expected[i].num_layers);
    const auto& tensors = std::get<DenseTensors>(layout.tensors);
    CHECK(tensors.names.at(ProjectionRole::k) == expected[i].key);
    CHECK(tensors.names.size() == 4);  // q, k, v, o
  }
}

constexpr AttentionSeries kEncoderSelf{AttentionStack::encoder, AttentionKind::self};
constexpr AttentionSeries kDecoderSelf{AttentionStack::decoder, AttentionKind::self};
constexpr AttentionSeries kDecoderCross{AttentionStack::decoder, AttentionKind::cross};

}  // namespace

TEST_CASE("encoders: their rows in the model-type table", "[encoders]") {
  CHECK(model_type_list(Family::bert) == "bert, roberta");
  CHECK(model_type_list(Family::clip) ==
        "clip, siglip, clip_text_model, clip_vision_model, siglip_text_model, siglip_vision_model");
  CHECK(model_type_list(Family::whisper) == "whisper, bart, mbart");
  for (Family family : {Family::vit, Family::t5})
    CHECK(model_type_list(family) == family_name(family));
  CHECK(family_named("whisper") == Family::whisper);
}

TEST_CASE("encoders: bert, roberta and vit are one encoder self-attention series", "[encoders]") {
  const test::TempDir dir;
  check_series(detect_series(Checkpoint::open(write_encoder(dir, "bert"))),
               {{kEncoderSelf, 4, 6, 24, 3, "bert.encoder.layer.{i}.attention.self.key.weight"}},
               Family::bert);
  const auto roberta = detect_series(Checkpoint::open(write_encoder(dir, "roberta")));
  check_series(roberta,
               {{kEncoderSelf, 4, 6, 24, 3, "roberta.encoder.layer.{i}.attention.self.key.weight"}},
               Family::bert);
  CHECK(roberta[0].model_type == "roberta");
  check_series(
      detect_series(Checkpoint::open(write_encoder(dir, "vit"))),
      {{kEncoderSelf, 4, 6, 24, 3, "vit.encoder.layer.{i}.attention.attention.key.weight"}},
      Family::vit);
}

TEST_CASE("encoders: t5 and whisper have encoder self, decoder self and decoder cross",
          "[encoders]") {
  const test::TempDir dir;
  // T5: head_dim is d_kv, and heads · d_kv (20) differs from d_model (16).
  check_series(detect_series(Checkpoint::open(write_encoder(dir, "t5"))),
               {{kEncoderSelf, 5, 4, 16, 3, "encoder.block.{i}.layer.0.SelfAttention.k.weight"},
                {kDecoderSelf, 5, 4, 16, 2, "decoder.block.{i}.layer.0.SelfAttention.k.weight"},
                {kDecoderCross, 5, 4, 16, 2, "decoder.block.{i}.layer.1.EncDecAttention.k.weight"}},
               Family::t5);
  const Checkpoint whisper = Checkpoint::open(write_encoder(dir, "whisper"));
  check_series(
      detect_series(whisper),
      {{kEncoderSelf, 4, 6, 24, 2, "model.encoder.layers.{i}.self_attn.k_proj.weight"},
       {kDecoderSelf, 6, 4, 24, 3, "model.decoder.layers.{i}.self_attn.k_proj.weight"},
       {kDecoderCross, 6, 4, 24, 3, "model.decoder.layers.{i}.encoder_attn.k_proj.weight"}},
      Family::whisper);
  CHECK(detect_layout(whisper).attention == kEncoderSelf);  // the first series
}

TEST_CASE("encoders: clip and siglip have a text and a vision tower", "[encoders]") {
  const test::TempDir dir;
  for (const char* model_type : {"clip", "siglip"}) {
    INFO(model_type);
    check_series(detect_series(Checkpoint::open(write_encoder(dir, model_type))),
                 {{{AttentionStack::text, AttentionKind::self},
                   4,
                   4,
                   16,
                   2,
                   "text_model.encoder.layers.{i}.self_attn.k_proj.weight"},
                  {{AttentionStack::vision, AttentionKind::self},
                   3,
                   8,
                   24,
                   3,
                   "vision_model.encoder.layers.{i}.self_attn.k_proj.weight"}},
                 Family::clip);
  }
}

TEST_CASE("encoders: without config.json the tensor names find the family", "[encoders]") {
  const test::TempDir dir;
  const std::filesystem::path out = write_encoder(dir, "whisper");
  std::filesystem::remove(out / "config.json");
  LayoutOverrides overrides;
  overrides.heads = 4;
  const auto layouts = detect_series(Checkpoint::open(out), overrides);
  REQUIRE(layouts.size() == 3);
  CHECK(layouts[0].family == Family::whisper);
  CHECK(layouts[2].attention == kDecoderCross);
  CHECK(layouts[2].heads == 4);  // --heads applies to every series
}

TEST_CASE("encoders: a multimodal decoder's vision tower does not make it an encoder",
          "[encoders]") {
  // Gemma 3's checkpoints hold a SigLIP tower, vision_tower.vision_model.encoder.layers.{i}.
  const test::TempDir dir;
  const std::filesystem::path out = dir.path() / "gemma3_mm";
  const auto result =
      test::run_test_writer("write_family_checkpoints.py",
                            "gemma3_mm " + out.string() + " " + (dir.path() / "ref").string() +
                                " --seed 1 --heads 8 --kv-heads 4 --head-dim 4 --d-model 32");
  REQUIRE(result.exit_code == 0);
  std::filesystem::remove(out / "config.json");  // by tensor names alone
  LayoutOverrides overrides;
  overrides.heads = 8;
  overrides.kv_heads = 4;
  const auto layouts = detect_series(Checkpoint::open(out), overrides);
  REQUIRE(layouts.size() == 1);
  CHECK(layouts[0].family == Family::llama);
  CHECK_FALSE(layouts[0].attention);
}

TEST_CASE("encoders: --attention self|cross|all", "[encoders]") {
  CHECK(parse_attention_choice("cross") == AttentionChoice::cross);
  CHECK(test::error_message([] { parse_attention_choice("both"); }) ==
        "--attention: expected self, cross or all, found \"both\"");
  CHECK(test::error_message([] { parse_attention_choice(std::string(1000, 'x')); }) ==
        "--attention: expected self, cross or all, found \"" + std::string(60, 'x') +
            "... (1000 bytes)\"");
  CHECK(attention_chosen(AttentionChoice::self, std::nullopt));  // a decoder-only model
  CHECK_FALSE(attention_chosen(AttentionChoice::cross, std::nullopt));
  CHECK(attention_chosen(AttentionChoice::cross, kDecoderCross));
  CHECK_FALSE(attention_chosen(AttentionChoice::self, kDecoderCross));
  CHECK(attention_chosen(AttentionChoice::all, kDecoderCross));
  CHECK(series_text(kDecoderCross) == "decoder cross");
}

TEST_CASE("encoders: a series' attention field is written only when present and read back",
          "[encoders]") {
  ModelReport decoder;
  decoder.label = "llama";
  decoder.family = "llama";
  decoder.variant = "mha";
  ModelReport cross = decoder;
  cross.label = "t5 [decoder cross]";
  cross.attention = kDecoderCross;
  const nlohmann::json document = to_json({decoder, cross});
  CHECK_FALSE(document["models"][0].contains("attention"));
  CHECK(document["models"][1]["attention"] ==
        nlohmann::json({{"stack", "decoder"}, {"kind", "cross"}}));
  const auto back = reports_from_json(document, "r.json");
  CHECK_FALSE(back[0].attention);
  CHECK(back[1].attention == kDecoderCross);

  nlohmann::json bad = document;
  bad["models"][1]["attention"]["stack"] = "middle";
  CHECK(test::error_message([&] { reports_from_json(bad, "r.json"); }) ==
        "r.json: models[1].attention.stack: expected encoder, decoder, text or vision, found "
        "\"middle\"");

  // CSV: the columns only when some model has a series, empty for the others.
  CHECK(to_csv({decoder}, {}).find("attention") == std::string::npos);
  const std::string csv = to_csv({decoder, cross}, {.summary = true});
  CHECK(csv.find("repr,attention_stack,attention_kind,heads") != std::string::npos);
  CHECK(csv.find("llama,,,llama,mha,qk,,,0") != std::string::npos);
  CHECK(csv.find("decoder,cross") != std::string::npos);
}

}  // namespace kvrank
