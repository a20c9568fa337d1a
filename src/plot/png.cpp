#include "kvrank/plot/png.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include "base/signal_cleanup.hpp"
#include "kvrank/base/error.hpp"

extern char** environ;

namespace kvrank {
namespace {

struct CloseFile {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using UnnamedFile = std::unique_ptr<std::FILE, CloseFile>;

/// An unnamed temporary file (already unlinked: nothing to clean up, whatever happens).
UnnamedFile unnamed_file(const OutputFile& output) {
  UnnamedFile file(std::tmpfile());
  if (!file) throw Error(output.path().string(), "cannot create a temporary file for the PNG");
  return file;
}

std::string first_line(std::FILE* file) {
  std::rewind(file);
  char buffer[512] = {};
  if (std::fgets(buffer, sizeof buffer, file) == nullptr) return "";
  std::string line = buffer;
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  void redirect(int from, int to) { posix_spawn_file_actions_adddup2(&actions_, from, to); }
  const posix_spawn_file_actions_t* get() const { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

/// Runs `argv` with the given standard streams and waits; returns the wait status.
int run_converter(char* const argv[], int in, int out, int err, const OutputFile& output) {
  SpawnActions actions;
  actions.redirect(in, STDIN_FILENO);
  actions.redirect(out, STDOUT_FILENO);
  actions.redirect(err, STDERR_FILENO);
  pid_t pid = 0;
  const int spawn_error = posix_spawnp(&pid, argv[0], actions.get(), nullptr, argv, environ);
  if (spawn_error != 0) {
    throw Error(output.path().string(),
                std::string("cannot render the figure: ") + argv[0] +
                    (spawn_error == ENOENT ? " not found (install librsvg2-bin, or write an .svg)"
                                           : " cannot be started"));
  }
  // Stopped with us on SIGINT/SIGTERM/SIGHUP. A signal in the instant before this line leaves it
  // running to its end: harmless, it writes only into our temporary file, which is removed.
  detail::register_child(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  detail::register_child(0);
  return status;
}

}  // namespace

void render_figure(const std::string& svg, FigureFormat format, int dpi, OutputFile& output) {
  const std::string what = format == FigureFormat::pdf ? "PDF" : "PNG";
  const UnnamedFile svg_file = unnamed_file(output);
  const UnnamedFile messages = unnamed_file(output);
  if (std::fwrite(svg.data(), 1, svg.size(), svg_file.get()) != svg.size() ||
      std::fflush(svg_file.get()) != 0) {
    throw Error(output.path().string(), "cannot write the SVG for the " + what + " conversion");
  }
  std::rewind(svg_file.get());
  // The figure's size is in inches: the resolution sets a PNG's pixels; a PDF page keeps the size.
  const int resolution = format == FigureFormat::pdf ? 72 : dpi;
  std::string program = "rsvg-convert", format_flag = "-f";
  std::string format_name = format == FigureFormat::pdf ? "pdf" : "png";
  std::string dpi_x = "--dpi-x=" + std::to_string(resolution);
  std::string dpi_y = "--dpi-y=" + std::to_string(resolution);
  char* const argv[] = {program.data(), format_flag.data(), format_name.data(),
                        dpi_x.data(),   dpi_y.data(),       nullptr};
  const int status = run_converter(argv, fileno(svg_file.get()), output.descriptor(),
                                   fileno(messages.get()), output);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  const std::string how = WIFEXITED(status)
                              ? "exited with status " + std::to_string(WEXITSTATUS(status))
                              : "was killed by signal " + std::to_string(WTERMSIG(status));
  const std::string said = first_line(messages.get());
  throw Error(output.path().string(), "cannot render " + what + ": rsvg-convert " + how +
                                          (said.empty() ? "" : ": " + said));
}

}  // namespace kvrank
