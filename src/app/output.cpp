#include "app/output.hpp"

#include <cstdio>

#include "kvrank/base/json_file.hpp"
#include "kvrank/plot/png.hpp"
#include "kvrank/report/result_files.hpp"

namespace fs = std::filesystem;

namespace kvrank::app::detail {

Destination::Destination(const std::string& path, const std::vector<fs::path>& inputs) {
  if (!path.empty() && path != "-") file_.emplace(path, inputs);
}

void Destination::emit(const std::string& content) {
  if (!file_) return write_stdout(content);
  file_->write(content);
  file_->commit();
}

void tell(const std::function<void(const std::string&)>& hook, const std::string& line) {
  if (hook) hook(line);
}

void report_written(const Hooks& hooks, const std::string& output, const std::string& what,
                    std::chrono::steady_clock::time_point started) {
  if (output.empty() || output == "-") return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char time[32];
  std::snprintf(time, sizeof time, "%.1f s", seconds);
  tell(hooks.info, "wrote " + output + ": " + what + " in " + time);
}

std::string layers_text(std::size_t layers) {
  return std::to_string(layers) + (layers == 1 ? " layer" : " layers");
}

std::string count_text(const std::vector<ModelReport>& models) {
  std::size_t layers = 0;
  bool same = true;
  for (const auto& model : models) {
    layers += model.layers.size();
    same = same && model.layers.size() == models.front().layers.size();
  }
  const std::string count =
      std::to_string(models.size()) + (models.size() == 1 ? " model" : " models");
  if (same && !models.empty()) return count + " × " + layers_text(models.front().layers.size());
  return count + ", " + layers_text(layers) + " in all";
}

void write_figure(const std::string& svg, FigureFormat format, int dpi, OutputFile& file) {
  if (format == FigureFormat::svg)
    file.write(svg);
  else
    render_figure(svg, format, dpi, file);
  file.commit();
}

}  // namespace kvrank::app::detail

namespace kvrank::app {

std::vector<ModelReport> read_results(const std::string& path) {
  return reports_from_json(read_json_object(path), path);
}

void write_text(const std::string& path, const std::string& content) {
  write_file_atomically(path, content);
}

void save_figure(const std::string& svg, const std::string& output, const FigureSettings& figure) {
  const FigureFormat format = figure_format(output);
  const int dpi = png_dpi(figure);
  OutputFile file(output);
  detail::write_figure(svg, format, dpi, file);
}

std::string format_results(const std::vector<ModelReport>& models, ResultFormat format,
                           bool similarity, bool summary) {
  switch (format) {
    case ResultFormat::json:
      return to_json_text(to_json(models, {.include_similarity = similarity}));
    case ResultFormat::csv:
    case ResultFormat::tsv:
      return to_csv(models,
                    {.separator = format == ResultFormat::csv ? ',' : '\t', .summary = summary});
    case ResultFormat::table:
      break;
  }
  return to_table(models);
}

}  // namespace kvrank::app
