// Tests of OutputFile (atomic_file.hpp): symlinks, FIFOs, folders, inputs, modes, debris
// (docs/choices.md, `-o FILE`; the modes of new files follow the umask).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

mode_t mode_of(const fs::path& path) {
  struct stat info {};
  REQUIRE(::stat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

std::string error_of(const fs::path& path, const std::vector<fs::path>& inputs = {}) {
  try {
    OutputFile output(path, inputs);
  } catch (const Error& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("OutputFile: nothing is visible before commit, and nothing is left without it",
          "[output]") {
  test::TempDir dir;
  test::write_file(dir / "out.json", "old");
  {
    OutputFile output(dir / "out.json");
    output.write("new");
    const auto names = names_in(dir.path());
    REQUIRE(names.size() == 2);
    CHECK(names[0].rfind(".out.json.tmp-", 0) == 0);
    CHECK(names[0].size() == std::string(".out.json.tmp-").size() + 6);
    CHECK(test::read_file(dir / "out.json") == "old");
  }
  CHECK(names_in(dir.path()) == std::vector<std::string>{"out.json"});
  CHECK(test::read_file(dir / "out.json") == "old");
}

TEST_CASE("OutputFile: a new file gets 0666 less the umask, a replaced one keeps its mode",
          "[output]") {
  test::TempDir dir;
  const mode_t previous = ::umask(027);
  write_file_atomically(dir / "new.json", "x");
  ::umask(previous);
  CHECK(mode_of(dir / "new.json") == 0640);

  test::write_file(dir / "mine.json", "x");
  ::chmod((dir / "mine.json").c_str(), 0604);
  write_file_atomically(dir / "mine.json", "y");
  CHECK(mode_of(dir / "mine.json") == 0604);
  CHECK(test::read_file(dir / "mine.json") == "y");
}

TEST_CASE("OutputFile: a symlink is followed and stays a link", "[output]") {
  test::TempDir dir;
  fs::create_directory(dir / "real");
  test::write_file(dir / "real" / "out.json", "old");
  fs::create_symlink("real/out.json", dir / "link.json");
  fs::create_symlink("link.json", dir / "link2.json");  // a chain
  write_file_atomically(dir / "link2.json", "new");
  CHECK(fs::is_symlink(dir / "link.json"));
  CHECK(fs::is_symlink(dir / "link2.json"));
  CHECK(test::read_file(dir / "real" / "out.json") == "new");
  CHECK(names_in(dir / "real") == std::vector<std::string>{"out.json"});

  fs::create_symlink("real/absent.json", dir / "dangling.json");
  write_file_atomically(dir / "dangling.json", "created");
  CHECK(fs::is_symlink(dir / "dangling.json"));
  CHECK(test::read_file(dir / "real" / "absent.json") == "created");

  fs::create_symlink("loop.json", dir / "loop.json");
  CHECK(error_of(dir / "loop.json") ==
        (dir / "loop.json").string() + ": cannot write: too many levels of symbolic links");
}

TEST_CASE("OutputFile: a FIFO is written through and stays a FIFO", "[output]") {
  test::TempDir dir;
  const fs::path fifo = dir / "out.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string received;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    char buffer[256];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) {
      received.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
  });
  write_file_atomically(fifo, "through the pipe");
  reader.join();
  CHECK(received == "through the pipe");
  struct stat info {};
  REQUIRE(::lstat(fifo.c_str(), &info) == 0);
  CHECK(S_ISFIFO(info.st_mode));
  CHECK(names_in(dir.path()) == std::vector<std::string>{"out.fifo"});
}

TEST_CASE("OutputFile: a directory is refused", "[output]") {
  test::TempDir dir;
  fs::create_directory(dir / "folder");
  CHECK(error_of(dir / "folder") == (dir / "folder").string() +
                                        ": is a directory; -o takes a file, a FIFO or a "
                                        "character device");
  CHECK(fs::is_empty(dir / "folder"));
}

TEST_CASE("OutputFile: an input of the run is refused, by device and inode", "[output]") {
  test::TempDir dir;
  fs::create_directory(dir / "ckpt");
  test::write_file(dir / "ckpt" / "model.safetensors", "weights");
  test::write_file(dir / "r.json", "result");
  fs::create_hard_link(dir / "r.json", dir / "hard.json");
  fs::create_symlink("r.json", dir / "soft.json");
  const std::vector<fs::path> inputs = {dir / "ckpt", dir / "hard.json"};
  CHECK(error_of(dir / "soft.json", inputs) ==
        (dir / "soft.json").string() + ": is also an input of this run (" +
            (dir / "hard.json").string() + "); choose another output file");
  CHECK(error_of(dir / "ckpt" / "model.safetensors", inputs) ==
        (dir / "ckpt" / "model.safetensors").string() + ": is also an input of this run (" +
            (dir / "ckpt" / "model.safetensors").string() + "); choose another output file");
  CHECK(error_of(dir / "other.json", inputs) == "no error");
  CHECK(test::read_file(dir / "r.json") == "result");
  CHECK(test::read_file(dir / "ckpt" / "model.safetensors") == "weights");
}

}  // namespace kvrank
