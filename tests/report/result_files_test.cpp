// Tests of result_files.hpp: JSON schema and round trip, CSV, table, strict reader, atomic writes.
#include "kvrank/report/result_files.hpp"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "kvrank/base/error.hpp"
#include "kvrank/base/version.hpp"
#include "support/catch.hpp"
#include "support/layer_metrics_check.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

// A layer with values that do not print exactly in few digits, so rounding would show.
LayerMetrics make_layer(int index, int heads, double scale) {
  LayerMetrics layer;
  layer.layer = index;
  layer.heads = heads;
  layer.erank = scale * (1.0 + index / 3.0);
  layer.erank_centered = scale * (0.5 + index / 7.0);
  layer.erank_pct = 100.0 * layer.erank / heads;
  layer.erank_centered_pct = 100.0 * layer.erank_centered / heads;
  layer.mean_similarity = 0.1 / (index + 3);
  layer.pcs_90 = 1 + index % heads;
  for (int h = 0; h < heads; ++h) {
    layer.eigenvalues.push_back(1.0 / (h + 1));
    layer.eigenvalues_centered.push_back(1.0 / (h + 2));
    layer.head_erank.push_back(std::sqrt(2.0 + h));
    layer.head_norm.push_back(1e-300 * (h + 1) + h);
  }
  layer.similarity = MatrixD::Identity(heads, heads);
  layer.similarity(0, 1) = layer.similarity(1, 0) = -1.0 / 3.0;
  return layer;
}

std::vector<ModelReport> sample_reports() {
  ModelReport lrkv;
  lrkv.label = "LRKV (r=16), \"tiny\" — ünïcode";
  lrkv.path = "/ckpts/lrkv-r16";
  lrkv.family = "llama";
  lrkv.variant = "lrkv";
  lrkv.geometry.heads = 4;
  lrkv.geometry.kv_heads = 4;
  lrkv.geometry.head_dim = 16;
  lrkv.geometry.d_model = 64;
  lrkv.geometry.num_layers = 3;
  lrkv.geometry.lrkv_rank = 16;
  lrkv.repr = "qk";
  lrkv.step = 1200;
  lrkv.source = {"ORG/lrkv@v1", "ORG/lrkv",   "0123abc",  "BF16",
                 "0-2",         std::nullopt, "1+weight", "1+weight"};
  for (int i = 0; i < 3; ++i) lrkv.layers.push_back(make_layer(i, 4, 1.1));
  lrkv.layers[1].zero_heads = {2};
  lrkv.summary = {1.5, 0.75, 37.5, 18.75};

  ModelReport mla = lrkv;
  mla.label = "MLA";
  mla.variant = "mla";
  mla.geometry.lrkv_rank.reset();
  mla.geometry.mla_kv_lora_rank = 512;
  mla.repr = "k";
  mla.step.reset();
  mla.source = {"/ckpts/mla", std::nullopt, std::nullopt, "F16,F32",
                std::nullopt, "map.json",   std::nullopt, std::nullopt};
  mla.layers = {make_layer(0, 2, 0.7), make_layer(5, 2, 0.9)};
  mla.summary = {0.1, 0.2, 0.3, 1.0 / 3.0};
  return {lrkv, mla};
}

void require_same_models(const std::vector<ModelReport>& a, const std::vector<ModelReport>& b,
                         bool with_similarity) {
  REQUIRE(a.size() == b.size());
  for (std::size_t m = 0; m < a.size(); ++m) {
    CHECK(a[m].label == b[m].label);
    CHECK(a[m].path == b[m].path);
    CHECK(a[m].step == b[m].step);
    CHECK(a[m].family == b[m].family);
    CHECK(a[m].variant == b[m].variant);
    CHECK(a[m].step == b[m].step);
    CHECK(a[m].source == b[m].source);
    CHECK(a[m].geometry == b[m].geometry);
    CHECK(a[m].repr == b[m].repr);
    CHECK(a[m].attention_layers == b[m].attention_layers);
    CHECK(a[m].summary.erank_mean == b[m].summary.erank_mean);
    CHECK(a[m].summary.erank_centered_mean == b[m].summary.erank_centered_mean);
    CHECK(a[m].summary.erank_pct_mean == b[m].summary.erank_pct_mean);
    CHECK(a[m].summary.erank_centered_pct_mean == b[m].summary.erank_centered_pct_mean);
    REQUIRE(a[m].layers.size() == b[m].layers.size());
    for (std::size_t l = 0; l < a[m].layers.size(); ++l) {
      test::require_same_layer(a[m].layers[l], b[m].layers[l], with_similarity);
    }
  }
}

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& item : object.items()) keys.insert(item.key());
  return keys;
}

std::string error_reading_golden(const json& document) {
  return test::error_message([&] { reports_from_json(document, "golden.json"); });
}

}  // namespace

TEST_CASE("to_json writes every key of the result schema", "[report]") {
  const json document = to_json(sample_reports());
  CHECK(keys_of(document) == std::set<std::string>{"schema_version", "tool", "models"});
  CHECK(document["schema_version"] == 2);
  CHECK(document["tool"] == json({{"name", "kvrank"}, {"version", version()}}));
  const json& model = document["models"][0];
  CHECK(keys_of(model) == std::set<std::string>{"label", "path", "step", "source", "dtype",
                                                "options", "family", "model_type", "variant",
                                                "heads", "kv_heads", "head_dim", "d_model",
                                                "num_layers", "lrkv_rank", "mla_kv_lora_rank",
                                                "repr", "layers", "summary"});
  CHECK(model["step"] == 1200);
  CHECK(document["models"][1]["step"].is_null());
  CHECK(model["source"] ==
        json({{"input", "ORG/lrkv@v1"}, {"hf_repo", "ORG/lrkv"}, {"hf_revision", "0123abc"}}));
  CHECK(model["dtype"] == "BF16");
  CHECK(model["options"] == json({{"layers", "0-2"},
                                  {"map", nullptr},
                                  {"qk_norm_gain", "1+weight"},
                                  {"input_norm_gain", "1+weight"}}));
  CHECK(model["lrkv_rank"] == 16);
  CHECK(model["mla_kv_lora_rank"].is_null());
  CHECK(document["models"][1]["lrkv_rank"].is_null());
  CHECK(document["models"][1]["mla_kv_lora_rank"] == 512);
  CHECK(keys_of(model["layers"][0]) ==
        std::set<std::string>{"layer", "kept_heads", "erank", "erank_centered", "erank_pct",
                              "erank_centered_pct", "mean_similarity", "pcs_90", "eigenvalues",
                              "eigenvalues_centered", "head_erank", "head_norm", "zero_heads"});
  CHECK(model["layers"][1]["zero_heads"] == json::array({2}));
  CHECK(keys_of(model["summary"]) == std::set<std::string>{"erank_mean", "erank_centered_mean",
                                                           "erank_pct_mean",
                                                           "erank_centered_pct_mean"});
  CHECK(model["layers"][0]["pcs_90"].is_number_integer());
}

TEST_CASE("the similarity matrix is written only when asked for", "[report]") {
  const json without = to_json(sample_reports());
  CHECK_FALSE(without["models"][0]["layers"][0].contains("similarity"));
  const json with = to_json(sample_reports(), {.include_similarity = true});
  const json& similarity = with["models"][0]["layers"][0]["similarity"];
  REQUIRE(similarity.size() == 4);
  CHECK(similarity[0].size() == 4);
  CHECK(similarity[1][0].get<double>() == -1.0 / 3.0);
  CHECK(similarity[2][2].get<double>() == 1.0);
}

TEST_CASE("JSON round trip through text is exact", "[report]") {
  const auto reports = sample_reports();
  for (bool with_similarity : {false, true}) {
    const std::string text = to_json(reports, {.include_similarity = with_similarity}).dump(2);
    const auto back = reports_from_json(json::parse(text), "r.json");
    require_same_models(reports, back, with_similarity);
  }
}

TEST_CASE("reports_from_json names the file and the place of a bad field", "[report]") {
  const json good = to_json(sample_reports(), {.include_similarity = true});
  CHECK(error_reading_golden(good) == "(no error)");

  json missing = good;
  missing["models"][1]["layers"][1].erase("erank");
  CHECK(error_reading_golden(missing) == "golden.json: models[1].layers[1]: missing \"erank\"");

  json no_summary_field = good;
  no_summary_field["models"][0]["summary"].erase("erank_pct_mean");
  CHECK(error_reading_golden(no_summary_field) ==
        "golden.json: models[0].summary: missing \"erank_pct_mean\"");

  json no_label = good;
  no_label["models"][0].erase("label");
  CHECK(error_reading_golden(no_label) == "golden.json: models[0]: missing \"label\"");

  json bad_step = good;
  bad_step["models"][0]["step"] = 1.5;
  CHECK(error_reading_golden(bad_step) ==
        "golden.json: models[0].step: expected an integer or null, found 1.5");

  json wrong_type = good;
  wrong_type["models"][0]["layers"][2]["erank_centered"] = "6.9";
  CHECK(error_reading_golden(wrong_type) ==
        "golden.json: models[0].layers[2].erank_centered: expected a number, found a string");

  json fractional = good;
  fractional["models"][0]["layers"][0]["pcs_90"] = 2.5;
  CHECK(error_reading_golden(fractional) ==
        "golden.json: models[0].layers[0].pcs_90: expected an integer, found 2.5");

  json bad_item = good;
  bad_item["models"][0]["layers"][0]["head_norm"][3] = nullptr;
  CHECK(error_reading_golden(bad_item) ==
        "golden.json: models[0].layers[0].head_norm[3]: expected a number, found null");

  json bad_rank = good;
  bad_rank["models"][0]["lrkv_rank"] = "16";
  CHECK(error_reading_golden(bad_rank) ==
        "golden.json: models[0].lrkv_rank: expected an integer, found a string");

  json ragged = good;
  ragged["models"][0]["layers"][0]["similarity"][1].erase(0);
  CHECK(error_reading_golden(ragged) ==
        "golden.json: models[0].layers[0].similarity[1]: expected an array of 4 numbers");

  json short_matrix = good;
  short_matrix["models"][0]["layers"][0]["similarity"].erase(0);
  CHECK(error_reading_golden(short_matrix) ==
        "golden.json: models[0].layers[0].similarity: expected 4 rows (heads), found 3");

  json models_not_array = good;
  models_not_array["models"] = json::object();
  CHECK(error_reading_golden(models_not_array) ==
        "golden.json: models: expected an array, found an object");

  CHECK(error_reading_golden(json::array()) == "golden.json: expected an object, found an array");
}

TEST_CASE("a hybrid's attention layers are written, read back and checked", "[report]") {
  std::vector<ModelReport> reports = sample_reports();
  reports[1].geometry.num_layers = 8;
  reports[1].attention_layers = {0, 5};
  const json document = to_json(reports);
  CHECK_FALSE(document["models"][0].contains("attention_layers"));  // every layer has heads
  CHECK(document["models"][1]["attention_layers"] == json({0, 5}));
  require_same_models(reports, reports_from_json(json::parse(document.dump()), "r.json"), false);

  json null_layers = document;
  null_layers["models"][1]["attention_layers"] = nullptr;
  CHECK(reports_from_json(null_layers, "r.json")[1].attention_layers.empty());
  json beyond = document;
  beyond["models"][1]["attention_layers"] = {0, 8};
  CHECK(error_reading_golden(beyond) ==
        "golden.json: models[1].attention_layers: expected increasing layer numbers from 0 to "
        "num_layers − 1 (7), found 8 at [1]");
  json unordered = document;
  unordered["models"][1]["attention_layers"] = {5, 0};
  CHECK(error_reading_golden(unordered) ==
        "golden.json: models[1].attention_layers: expected increasing layer numbers from 0 to "
        "num_layers − 1 (7), found 0 at [1]");
  json not_numbers = document;
  not_numbers["models"][1]["attention_layers"] = {"5"};
  CHECK(error_reading_golden(not_numbers) ==
        "golden.json: models[1].attention_layers[0]: expected an integer, found a string");
}

TEST_CASE("reports_from_json checks every similarity row before allocating heads² values",
          "[report]") {
  // 100,000 empty rows: a small file that would have allocated 80 GB (bad_alloc, exit 3).
  json claimed = to_json(sample_reports(), {.include_similarity = true});
  json& layer = claimed["models"][0]["layers"][0];
  layer["kept_heads"] = 100'000;
  layer["similarity"] = json::array();
  for (int i = 0; i < 100'000; ++i) layer["similarity"].push_back(json::array());
  CHECK(error_reading_golden(claimed) ==
        "golden.json: models[0].layers[0].similarity[0]: expected an array of 100000 numbers");
}

TEST_CASE("reports_from_json accepts schema_version 1 and 2 only", "[report]") {
  json document = to_json(sample_reports());
  document["schema_version"] = 3;
  CHECK(error_reading_golden(document) ==
        "golden.json: unsupported schema_version 3 (expected 1 to 2)");
  document["schema_version"] = "1";
  CHECK(error_reading_golden(document) ==
        "golden.json: unsupported schema_version \"1\" (expected 1 to 2)");
  document.erase("schema_version");
  CHECK(error_reading_golden(document) == "golden.json: missing \"schema_version\"");
}

TEST_CASE("a version-1 file reads back: no step or provenance, a layer's heads named heads",
          "[report]") {
  json document = to_json(sample_reports());
  document["schema_version"] = 1;
  for (json& model : document["models"]) {
    for (const char* key : {"step", "source", "dtype", "options"}) model.erase(key);
    for (json& layer : model["layers"]) {
      layer["heads"] = layer["kept_heads"];
      layer.erase("kept_heads");
    }
  }
  const auto reports = reports_from_json(document, "v1.json");
  REQUIRE(reports.size() == 2);
  CHECK_FALSE(reports[0].step);
  CHECK(reports[0].source == Provenance{});
  CHECK(reports[0].layers[2].heads == sample_reports()[0].layers[2].heads);
  CHECK(reports[0].geometry == sample_reports()[0].geometry);
}

TEST_CASE("CSV has the exact header, one row per model and layer, exact numbers", "[report]") {
  const auto reports = sample_reports();
  const std::string csv = to_csv(reports);
  std::istringstream lines(csv);
  std::string header;
  std::getline(lines, header);
  CHECK(header ==
        "label,step,source,family,variant,repr,heads,kv_heads,head_dim,d_model,num_layers,"
        "lrkv_rank,mla_kv_lora_rank,layer,kept_heads,erank,erank_pct,erank_centered,"
        "erank_centered_pct,mean_similarity,pcs_90");
  std::vector<std::string> rows;
  for (std::string row; std::getline(lines, row);) rows.push_back(row);
  REQUIRE(rows.size() == 5);  // 3 + 2 layers

  // The MLA rows have a plain label: split on commas and read the numbers back exactly.
  const std::string& row = rows[4];
  std::vector<std::string> fields;
  std::stringstream stream(row);
  for (std::string field; std::getline(stream, field, ',');) fields.push_back(field);
  REQUIRE(fields.size() == 21);
  const LayerMetrics& layer = reports[1].layers[1];
  const std::vector<std::string> model_fields{
      "MLA", "", "/ckpts/mla", "llama", "mla", "k", "4", "4", "16", "64", "3", "", "512", "5", "2"};
  CHECK(std::vector<std::string>(fields.begin(), fields.begin() + 15) == model_fields);
  CHECK(std::stod(fields[15]) == layer.erank);
  CHECK(std::stod(fields[16]) == layer.erank_pct);
  CHECK(std::stod(fields[17]) == layer.erank_centered);
  CHECK(std::stod(fields[18]) == layer.erank_centered_pct);
  CHECK(std::stod(fields[19]) == layer.mean_similarity);
  CHECK(fields[20] == std::to_string(layer.pcs_90));
}

TEST_CASE("CSV summary: one row per model and representation, holding the means", "[report]") {
  const auto reports = sample_reports();
  const std::string csv = to_csv(reports, {.summary = true});
  std::istringstream lines(csv);
  std::vector<std::string> rows;
  for (std::string row; std::getline(lines, row);) rows.push_back(row);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] ==
        "label,step,source,family,variant,repr,heads,kv_heads,head_dim,d_model,num_layers,"
        "lrkv_rank,mla_kv_lora_rank,layers_analysed,erank_mean,erank_pct_mean,erank_centered_mean,"
        "erank_centered_pct_mean");
  CHECK(rows[2] == "MLA,,/ckpts/mla,llama,mla,k,4,4,16,64,3,,512,2,0.1,0.3,0.2,0.3333333333333333");
}

TEST_CASE("TSV: the same columns separated by tabs, a field with a tab quoted", "[report]") {
  auto reports = sample_reports();
  reports[1].label = "M\tL";
  const std::string tsv = to_csv(reports, {.separator = '\t'});
  CHECK(tsv.rfind("label\tstep\tsource\tfamily\t", 0) == 0);
  CHECK(tsv.find("\n\"M\tL\"\t\t/ckpts/mla\tllama\tmla\tk\t") != std::string::npos);
  CHECK(tsv.find("\n\"LRKV (r=16), \"\"tiny\"\" — ünïcode\"\t1200\t") != std::string::npos);
}

TEST_CASE("CSV quotes labels with commas and quotes as RFC 4180 says", "[report]") {
  const auto reports = sample_reports();
  const std::string csv = to_csv(reports);
  CHECK(csv.find("\n\"LRKV (r=16), \"\"tiny\"\" — ünïcode\",1200,ORG/lrkv@v1,llama,lrkv,qk,") !=
        std::string::npos);

  // Independent reader: Python's csv module must see the original label and 11 fields per row.
  test::TempDir dir;
  test::write_file(dir / "r.csv", csv);
  test::write_file(dir / "read.py",
                   "import csv, sys\n"
                   "rows = list(csv.reader(open(sys.argv[1], encoding='utf-8', newline='')))\n"
                   "assert all(len(r) == 21 for r in rows), rows\n"
                   "sys.stdout.write(str(len(rows)) + '\\n' + rows[1][0])\n");
  const auto result =
      test::run_command(std::string(KVRANK_PYTHON) + " " + (dir / "read.py").string() + " " +
                        (dir / "r.csv").string());
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "6\n" + reports[0].label);
}

TEST_CASE("the table shows each model's heading, one row per layer and the summary", "[report]") {
  const auto reports = sample_reports();
  const std::string table = to_table(reports);
  std::vector<std::string> lines;
  std::istringstream stream(table);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  // Per model: heading, column header, layers, summary; one blank line between models.
  REQUIRE(lines.size() == (2 + 3 + 1) + 1 + (2 + 2 + 1));
  CHECK(lines[0].rfind(reports[0].label, 0) == 0);
  CHECK(lines[0].find("lrkv r=16") != std::string::npos);
  CHECK(lines[0].find("heads 4") != std::string::npos);
  CHECK(lines[0].find("repr qk") != std::string::npos);
  CHECK(lines[7].find("kv_lora_rank=512") != std::string::npos);
  // Layer 1 of the first model: erank 1.1·(4/3) = 1.467, 36.7 % of 4 heads, zero head 2 noted.
  CHECK(lines[3].find("1.467") != std::string::npos);
  CHECK(lines[3].find("36.7%") != std::string::npos);
  CHECK(lines[3].find("zero heads: 2") != std::string::npos);
  CHECK(lines[5].find("mean") != std::string::npos);
  CHECK(lines[5].find("37.5%") != std::string::npos);
  CHECK(lines[5].find("18.8%") != std::string::npos);
  // The bar is erank/H of ten cells: 36.7 % → 3 full blocks then a partial one.
  CHECK(lines[3].find("███▋") != std::string::npos);
}

TEST_CASE("write_file_atomically writes, replaces and leaves nothing behind on failure",
          "[report]") {
  test::TempDir dir;
  const auto target = dir / "curves.json";
  write_file_atomically(target, "first");
  CHECK(test::read_file(target) == "first");
  write_file_atomically(target, "second, longer content");
  CHECK(test::read_file(target) == "second, longer content");

  // A plain new file's mode (0666 less umask), not mkstemp's 0600.
  const mode_t mask = umask(0);
  umask(mask);
  struct stat info {};
  REQUIRE(::stat(target.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == (0666 & ~mask));

  // The folder does not exist: an error naming the path, and no file.
  const auto missing = dir / "no-such-folder" / "out.json";
  const std::string message = test::error_message([&] { write_file_atomically(missing, "x"); });
  CHECK(message.rfind(missing.string() + ": cannot create a temporary file in ", 0) == 0);
  CHECK(message.find(": no such file or directory") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(missing));

  // The target is a folder: rename fails; the temporary file must be gone.
  std::filesystem::create_directory(dir / "taken");
  CHECK_THROWS_AS(write_file_atomically(dir / "taken", "x"), Error);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"curves.json", "taken"});
  CHECK(std::filesystem::is_empty(dir / "taken"));
}

}  // namespace kvrank

namespace kvrank {

TEST_CASE("report: each metric of the metric table is written under its name", "[report]") {
  ModelReport model;
  const LayerMetrics layer = make_layer(3, 4, 1.1);  // a distinct value in each field
  model.layers.push_back(layer);
  const nlohmann::json written = to_json({model})["models"][0]["layers"][0];
  for (Curve metric : {Curve::erank, Curve::erank_centered, Curve::erank_pct,
                       Curve::erank_centered_pct, Curve::mean_similarity, Curve::pcs_90}) {
    INFO(curve_name(metric));
    CHECK(written.at(std::string(curve_name(metric))).get<double>() == curve_value(layer, metric));
  }
}

}  // namespace kvrank
