// The requests' checks (requests.hpp): each names the option as the command line spells it and
// the rule it breaks, and each rule is written once, here or in the library function named.
#include "kvrank/app/requests.hpp"

#include <array>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "kvrank/base/error.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/base/usage.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/head_pairs.hpp"
#include "kvrank/plot/figure_options.hpp"
#include "kvrank/plot/svg.hpp"

namespace fs = std::filesystem;

namespace kvrank::app {
namespace {

struct FormatRow {
  ResultFormat value;
  std::string_view name;
  std::string_view extension;  ///< the -o extension that names it
};
constexpr std::array<FormatRow, 4> kResultFormats{{{ResultFormat::table, "table", ".txt"},
                                                   {ResultFormat::json, "json", ".json"},
                                                   {ResultFormat::csv, "csv", ".csv"},
                                                   {ResultFormat::tsv, "tsv", ".tsv"}}};
static_assert(in_enum_order(kResultFormats, &FormatRow::value));

constexpr std::array<Named<Annotate>, 3> kAnnotate{
    {{Annotate::automatic, "auto"}, {Annotate::github, "github"}, {Annotate::none, "none"}}};
static_assert(in_enum_order(kAnnotate));

/// plan's --gauge: align heads before merging (auto) or not (none).
constexpr std::array<Named<bool>, 2> kGauges{{{true, "auto"}, {false, "none"}}};

/// inspect's --format: the text listing (also called table) or JSON; check's: text or JSON. The
/// value is whether JSON is written.
constexpr std::array<Named<bool>, 3> kInspectFormats{
    {{false, "text"}, {false, "table"}, {true, "json"}}};
constexpr std::array<Named<bool>, 2> kCheckFormats{{{false, "text"}, {true, "json"}}};

/// Whether a plan has a form in `format` (a table, JSON or CSV; no TSV).
bool plan_writes(ResultFormat format) { return format != ResultFormat::tsv; }

[[noreturn]] void invalid(const std::string& option, const std::string& rule) {
  throw Error("", option + ": " + rule);
}

/// A count of something that must exist at least once (--heads …), when given.
void check_positive(const char* option, const std::optional<int>& value) {
  if (value && *value < 1) invalid(option, "must be 1 or more, found " + std::to_string(*value));
}

void check_inputs_given(const std::vector<std::string>& inputs, const char* what) {
  if (inputs.empty()) invalid(what, "at least one is required");
}

/// The items of a comma list, empty ones skipped ("qk,,ov" → qk, ov).
std::vector<std::string_view> comma_items(std::string_view text) {
  std::vector<std::string_view> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

}  // namespace

std::string_view result_format_name(ResultFormat format) noexcept {
  return kResultFormats[static_cast<std::size_t>(format)].name;
}

ResultFormat parse_result_format(std::string_view name) {
  if (const auto format = value_named(kResultFormats, name, &FormatRow::value)) return *format;
  invalid("--format", expected_name(kResultFormats, name));
}

std::vector<std::string> result_format_names() { return names_of(kResultFormats); }

std::vector<std::string> plan_format_names() {
  std::vector<std::string> names;
  for (const FormatRow& row : kResultFormats)
    if (plan_writes(row.value)) names.emplace_back(row.name);
  return names;
}

std::optional<ResultFormat> format_of_extension(const std::string& output) {
  const std::string extension = ascii_lower(fs::path(output).extension().string());
  for (const FormatRow& row : kResultFormats)
    if (extension == row.extension) return row.value;
  return std::nullopt;
}

ResultFormat written_format(const std::optional<ResultFormat>& format, const std::string& output) {
  return format_of_extension(output).value_or(format.value_or(ResultFormat::table));
}

std::vector<std::string> annotate_names() { return names_of(kAnnotate); }

std::string_view annotate_name(Annotate choice) noexcept { return name_of(kAnnotate, choice); }

Annotate parse_annotate(std::string_view name) {
  if (const auto choice = value_named(kAnnotate, name)) return *choice;
  invalid("--annotate", expected_name(kAnnotate, name));
}

std::vector<std::string> inspect_format_names() { return names_of(kInspectFormats); }

bool parse_inspect_json(std::string_view name) {
  if (const auto json = value_named(kInspectFormats, name)) return *json;
  invalid("--format", expected_name(kInspectFormats, name));
}

std::vector<std::string> check_format_names() { return names_of(kCheckFormats); }

bool parse_check_json(std::string_view name) {
  if (const auto json = value_named(kCheckFormats, name)) return *json;
  invalid("--format", expected_name(kCheckFormats, name));
}

std::vector<std::string> gauge_names() { return names_of(kGauges); }

std::string_view gauge_name(bool align) noexcept {
  // kGauges lists auto (true) first, as the help shows it: looked up by value, not by index.
  for (const Named<bool>& gauge : kGauges)
    if (gauge.value == align) return gauge.name;
  return {};
}

bool parse_gauge(std::string_view name) {
  if (const auto align = value_named(kGauges, name)) return *align;
  invalid("--gauge", expected_name(kGauges, name));
}

std::vector<Repr> parse_repr_list(std::string_view text) {
  std::vector<Repr> reprs;
  for (std::string_view name : comma_items(text)) reprs.push_back(parse_repr(name));
  return reprs;
}

std::vector<std::string> parse_name_list(std::string_view text) {
  const std::vector<std::string_view> items = comma_items(text);
  return {items.begin(), items.end()};
}

std::vector<Curve> parse_metric_list(std::string_view text) {
  std::vector<Curve> metrics;
  for (std::string_view name : comma_items(text)) metrics.push_back(parse_curve(name));
  return metrics;
}

std::vector<double> parse_number_list(std::string_view option, std::string_view text) {
  std::vector<double> numbers;
  for (std::string_view view : comma_items(text)) {
    const std::string item(view);
    try {
      std::size_t used = 0;
      numbers.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::logic_error&) {
      invalid(std::string(option), "\"" + excerpt(item) + "\" is not a number");
    }
  }
  return numbers;
}

int parse_int_option(std::string_view option, std::string_view text) {
  return static_cast<int>(parse_integer(option, text, std::numeric_limits<int>::min(),
                                        std::numeric_limits<int>::max()));
}

// ---- the requests
// --------------------------------------------------------------------------------

void LayoutRequest::validate() const {
  check_positive("--heads", heads);
  check_positive("--kv-heads", kv_heads);
  check_positive("--head-dim", head_dim);
}

LayoutOverrides LayoutRequest::overrides() const {
  LayoutOverrides result;
  result.family = family;
  result.heads = heads;
  result.kv_heads = kv_heads;
  result.head_dim = head_dim;
  if (map_file) result.map_file = fs::path(*map_file);
  result.activations = activations;
  result.fold_input_norm = fold_input_norm;
  return result;
}

OpenOptions LayoutRequest::open_options() const {
  OpenOptions result;
  result.npy.bf16_void = npy_bf16;
  return result;
}

ResultFormat AnalyzeRequest::output_format() const { return written_format(format, output); }

namespace {

/// A --format that contradicts -o's extension is a usage error, so that `-o out.json` can never
/// hold a table.
void check_format_matches_output(const std::optional<ResultFormat>& format,
                                 const std::string& output) {
  const std::optional<ResultFormat> named = format_of_extension(output);
  if (!named || !format || *format == *named) return;
  throw Error("", "--format " + std::string(result_format_name(*format)) + " contradicts -o " +
                      output + " (a " + fs::path(output).extension().string() + " file holds " +
                      std::string(result_format_name(*named)) +
                      "): drop --format, or name the file for the format");
}

/// --similarity and --summary change what one format holds; with any other they are refused
/// rather than dropped.
void check_format_flags(const AnalyzeRequest& request) {
  const ResultFormat format = request.output_format();
  const std::string name(result_format_name(format));
  if (request.similarity && format != ResultFormat::json)
    invalid("--similarity",
            "the H×H matrices go only into JSON (--format json or -o FILE.json), not into " + name);
  if (request.summary && format != ResultFormat::csv && format != ResultFormat::tsv)
    invalid("--summary",
            "one row per model and representation is a CSV or TSV form (--format csv or -o "
            "FILE.csv), not " +
                name);
}

}  // namespace

void AnalyzeRequest::validate() const {
  check_inputs_given(inputs, "inputs");
  check_given_per_input("--label", labels.size(), inputs.size());
  check_given_per_input("--step", steps.size(), inputs.size());
  check_given_per_input("--run", runs.size(), inputs.size());
  for (const std::string& run : runs)
    if (run.empty()) invalid("--run", "a run's name must not be empty");
  for (std::int64_t step : steps)
    if (step < 0) invalid("--step", "must be 0 or more, found " + std::to_string(step));
  check_thread_count(threads);
  layout.validate();
  if (pairs && (*pairs < 1 || *pairs > kMaxNamedPairs))
    invalid("--pairs",
            "must be 1 to " + std::to_string(kMaxNamedPairs) + ", found " + std::to_string(*pairs));
  check_format_matches_output(format, output);
  check_format_flags(*this);
}

void DiffRequest::validate() const {
  if (a.empty() || b.empty()) invalid("inputs", "two models are required: diff A B");
  if (labels.size() > 2)
    invalid("--label", "given " + std::to_string(labels.size()) + " times for 2 models");
  if (top < 0 || top > kMaxDiffTop)
    invalid("--top",
            "must be 0 to " + std::to_string(kMaxDiffTop) + ", found " + std::to_string(top));
  if (!figure.empty()) figure_format(figure);  // a wrong extension, before anything is read
  if (!colour_map.empty()) {
    if (figure.empty()) invalid("--colour-map", "colours the heatmap of --figure: give --figure");
    parse_colour_map(colour_map);  // plot_options' check of plot's --colour-map
  }
  layout.validate();
  check_format_matches_output(format, output);
}

void PlanRequest::validate() const {
  check_inputs_given(inputs, "inputs");
  if (labels.size() > inputs.size())
    invalid("--label", "given " + std::to_string(labels.size()) + " times for " +
                           std::to_string(inputs.size()) + " input(s)");
  if (options.kv_heads_after < 1)
    invalid("--kv-heads", "the key/value heads after the conversion (1 or more) are required");
  if (options.latent_energy && !(*options.latent_energy > 0 && *options.latent_energy <= 1))
    invalid("--latent-energy", "must lie in (0, 1]");
  if (options.refit.value_or(false) && !options.align)
    invalid("--refit", std::string(kRefitNeedsAlignment));
  if (options.random_partitions < 1 || options.random_partitions > kMaxRandomPartitions)
    invalid("--random", "must be 1 to " + std::to_string(kMaxRandomPartitions) + ", found " +
                            std::to_string(options.random_partitions));
  if (!write_checkpoint.empty() && inputs.size() != 1)
    invalid("--write-checkpoint", "writes one converted checkpoint: give one input");
  if (!plan_writes(output_format()))
    invalid("--format", "a plan is written as " + name_list(plan_format_names()));
  check_format_matches_output(format, output);
}

ResultFormat PlanRequest::output_format() const { return written_format(format, output); }

ResultFormat DiffRequest::output_format() const { return written_format(format, output); }

void InspectRequest::validate() const {
  check_inputs_given(inputs, "inputs");
  layout.validate();
}

void CheckRequest::validate() const {
  kvrank::validate(options);  // the library's one rule (report/check.hpp)
}

void PlotRequest::validate() const {
  if (panels.empty()) check_inputs_given(inputs, "inputs");
  if (heatmap_layer && *heatmap_layer < 0)
    invalid("--heatmap",
            "must be a layer index, 0 or more, found " + std::to_string(*heatmap_layer));
  if (!over_steps.empty()) {
    parse_step_plot(over_steps);
    check_step_plot_inputs(inputs.size() + panels.size());
  }
  png_dpi(figure);  // checked even for an SVG, which has no use for it: a wrong value is wrong
  // The output's extension and the other figure settings are checked by the plot library
  // (figure_format, plot_options) before anything is read.
}

void MergeRequest::validate() const {
  check_inputs_given(parts, "parts");
  if (const auto named = format_of_extension(output); named && *named != ResultFormat::json)
    throw Error("", "-o " + output + ": merge writes JSON, not " +
                        std::string(result_format_name(*named)) + " (name the file .json)");
}

void BaselineRequest::validate() const {
  if (layers < 1) invalid("--layers", "must be 1 or more, found " + std::to_string(layers));
  if (heads && *heads < 2)
    invalid("--heads", "must be 2 or more, found " + std::to_string(*heads) +
                           " (one head has no other to be redundant with: its erank of 1 "
                           "would read 100 %)");
  check_format_matches_output(format, output);
}

void SynthRequest::validate() const {
  if (output.empty()) invalid("-o", "the output folder is required");
}

}  // namespace kvrank::app
