// The analysis pipeline: labels, the fully-redundant baseline, and analyze_checkpoint
// on the trained data/tiny/gqa checkpoint (and stories260K where ../shared/fixtures exists).
#include "kvrank/analysis/analysis.hpp"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using test::error_message;

}  // namespace

TEST_CASE("fully_redundant_baseline: erank 1 at every layer", "[families][analysis]") {
  const ModelReport baseline = fully_redundant_baseline(3, 4);
  CHECK(baseline.label == "Fully redundant");
  CHECK(baseline.variant == "baseline");
  CHECK(baseline.family == "baseline");
  CHECK(baseline.geometry.heads == 4);
  CHECK(baseline.geometry.num_layers == 3);
  REQUIRE(baseline.layers.size() == 3);
  for (int i = 0; i < 3; ++i) {
    const LayerMetrics& layer = baseline.layers[static_cast<std::size_t>(i)];
    CHECK(layer.layer == i);
    CHECK(layer.heads == 4);
    CHECK(layer.erank == 1.0);
    CHECK(layer.erank_centered == 1.0);
    CHECK(layer.erank_pct == Approx(25.0));
    CHECK(layer.mean_similarity == 1.0);
    CHECK(layer.pcs_90 == 1);
    REQUIRE(layer.eigenvalues.size() == 4);  // (H, 0, 0, 0) up to the eigensolver's rounding
    CHECK(layer.eigenvalues[0] == Approx(4.0).epsilon(1e-12));
    for (std::size_t j = 1; j < 4; ++j) CHECK(std::abs(layer.eigenvalues[j]) < 1e-12);
    // The eigenvalues of S = 11ᵀ give exactly this effective rank.
    CHECK(effective_rank(layer.eigenvalues) == Approx(1.0));
  }
  CHECK(baseline.summary.erank_mean == 1.0);
  CHECK(baseline.summary.erank_pct_mean == Approx(25.0));
  CHECK_THAT(error_message([] { fully_redundant_baseline(3, 0); }),
             Catch::Matchers::Contains("head"));
}

TEST_CASE("summarize: means over layers", "[families][analysis]") {
  std::vector<LayerMetrics> layers(2);
  layers[0].erank = 2;
  layers[1].erank = 4;
  layers[0].erank_centered_pct = 10;
  layers[1].erank_centered_pct = 30;
  const Summary summary = summarize(layers);
  CHECK(summary.erank_mean == 3.0);
  CHECK(summary.erank_centered_pct_mean == 20.0);
  CHECK(summarize({}).erank_mean == 0.0);
}

namespace {

struct LlamaGqa {
  int layers, heads, kv_heads, head_dim, d_model;
};

/// analyze_checkpoint on a real Llama GQA checkpoint: every layer, progress, layer selection.
void check_analyze_llama_gqa(const std::filesystem::path& path, const LlamaGqa& want) {
  const int n = want.layers;
  AnalyzeOptions options;
  std::vector<std::pair<int, int>> progress;
  options.progress = [&](int done, int total) { progress.emplace_back(done, total); };
  const std::vector<ModelReport> reports = analyze_checkpoint(path, "stories", options);
  REQUIRE(reports.size() == 1);
  const ModelReport& report = reports[0];
  CHECK(report.label == "stories");
  CHECK(report.path == path.string());
  CHECK(report.repr == "qk");
  CHECK(report.family == "llama");
  CHECK(report.variant == "gqa");
  CHECK((report.geometry.heads == want.heads && report.geometry.kv_heads == want.kv_heads &&
         report.geometry.head_dim == want.head_dim));
  CHECK((report.geometry.d_model == want.d_model && report.geometry.num_layers == n));
  REQUIRE(report.layers.size() == static_cast<std::size_t>(n));
  double sum = 0;
  std::vector<std::pair<int, int>> expected_progress;
  for (int i = 0; i < n; ++i) {
    const LayerMetrics& layer = report.layers[static_cast<std::size_t>(i)];
    CHECK(layer.layer == i);
    CHECK(layer.heads == want.heads);
    CHECK(layer.erank > 1.0);
    CHECK(layer.erank <= want.heads + 1e-9);
    sum += layer.erank;
    expected_progress.emplace_back(i + 1, n);
  }
  CHECK(report.summary.erank_mean == Approx(sum / n));
  CHECK(progress == expected_progress);

  options.layers = std::vector<int>{1, 3};
  options.reprs = {Repr::qk, Repr::k};
  const std::vector<ModelReport> selected = analyze_checkpoint(path, "s", options);
  REQUIRE(selected.size() == 2);
  CHECK(selected[1].repr == "k");
  REQUIRE(selected[0].layers.size() == 2);
  CHECK(selected[0].layers[1].layer == 3);
  CHECK(selected[0].layers[1].erank == Approx(report.layers[3].erank).epsilon(1e-12));
  // GQA: each KV head serves H / H_kv query heads, so `k` sees at most H_kv distinct heads.
  CHECK(selected[1].layers[0].erank <= want.kv_heads + 1e-6);

  options.layers = std::vector<int>{n};
  CHECK_THAT(error_message([&] { analyze_checkpoint(path, "s", options); }),
             Catch::Matchers::Contains("layer " + std::to_string(n) + " out of range"));
}

}  // namespace

TEST_CASE("analyze_checkpoint on data/tiny/gqa: every layer, progress, selection",
          "[families][analysis]") {
  check_analyze_llama_gqa(test::tiny_model("gqa"), {4, 8, 2, 16, 128});
}

TEST_CASE("analyze_checkpoint on stories260K: every layer, progress, selection",
          "[.shared][analysis]") {
  check_analyze_llama_gqa(test::shared_stories260k(), {5, 8, 4, 8, 64});
}

}  // namespace kvrank
