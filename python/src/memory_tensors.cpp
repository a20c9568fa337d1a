#include "memory_tensors.hpp"

#include <memory>
#include <mutex>
#include <span>
#include <utility>

#include "kvrank/app/commands.hpp"
#include "kvrank/base/error.hpp"

namespace py = pybind11;

namespace kvrank_python {
namespace {

using kvrank::app::kInMemory;

/// Checks that `info` is one C-ordered block (a view reads the bytes as they lie).
void check_c_order(const std::string& name, const py::buffer_info& info) {
  py::ssize_t stride = info.itemsize;
  for (std::size_t axis = info.shape.size(); axis-- > 0;) {
    if (info.shape[axis] > 1 && info.strides[axis] != stride)
      throw kvrank::Error(kInMemory, name, "the tensor's buffer is not one C-ordered block");
    stride *= info.shape[axis];
  }
}

std::span<const std::byte> bytes_of(const py::buffer_info& info) {
  return {static_cast<const std::byte*>(info.ptr),
          static_cast<std::size_t>(info.size * info.itemsize)};
}

/// The first line of a Python exception's message, or its type's name when it has none.
std::string first_line(const py::error_already_set& error) {
  std::string text = py::str(error.value());
  text = text.substr(0, text.find('\n'));
  return text.empty() ? std::string(py::str(error.type().attr("__name__"))) : text;
}

/// The bytes of an entry that cannot be read where it lies (on a GPU, a strided view, big-endian):
/// its Python `copy` function runs when the library first reads it, and the copy is dropped when
/// the library releases it after the layer, so a model on a GPU costs one layer of CPU memory.
/// The GIL is taken for both (the library runs without it); a mutex makes get() safe from the
/// library's threads, always taken before the GIL.
class PythonCopy final : public kvrank::DeferredBytes {
 public:
  PythonCopy(std::string name, std::size_t size, py::object copy)
      : name_(std::move(name)), size_(size), copy_(std::move(copy)) {}
  PythonCopy(const PythonCopy&) = delete;
  PythonCopy& operator=(const PythonCopy&) = delete;
  ~PythonCopy() override {
    py::gil_scoped_acquire gil;
    drop();
    copy_ = py::object();
  }

  std::size_t size() const noexcept override { return size_; }

  std::span<const std::byte> get() const override {
    std::lock_guard lock(mutex_);
    if (!buffer_) {
      py::gil_scoped_acquire gil;
      load();
    }
    return bytes_of(*buffer_);
  }

  void release() const noexcept override {
    std::lock_guard lock(mutex_);
    if (!buffer_) return;
    py::gil_scoped_acquire gil;
    drop();
  }

 private:
  /// Runs `copy` (GIL held); its kvrank.Error (what cannot be read) or any other exception (a
  /// failed copy from the device) becomes a kvrank::Error naming the tensor. Ctrl-C stays a
  /// KeyboardInterrupt.
  void load() const {
    try {
      py::object copied = copy_();
      auto buffer = std::make_unique<py::buffer_info>(py::buffer(copied).request());
      check_c_order(name_, *buffer);
      if (bytes_of(*buffer).size() != size_)
        throw kvrank::Error(kInMemory, name_,
                            "its copy holds " + std::to_string(bytes_of(*buffer).size()) +
                                " bytes, expected " + std::to_string(size_));
      held_ = std::move(copied);
      buffer_ = std::move(buffer);
    } catch (py::error_already_set& error) {
      if (error.matches(PyExc_KeyboardInterrupt)) throw;
      const py::object kvrank_error = py::module_::import("kvrank._kvrank").attr("Error");
      if (error.matches(kvrank_error)) throw kvrank::Error("", first_line(error));
      throw kvrank::Error(kInMemory, name_,
                          "could not copy the tensor to the CPU (" + first_line(error) + ")");
    }
  }

  void drop() const noexcept {
    buffer_.reset();  // the buffer view first, then the object it views
    held_ = py::object();
  }

  std::string name_;
  std::size_t size_;
  py::object copy_;
  mutable std::mutex mutex_;
  mutable py::object held_;
  mutable std::unique_ptr<py::buffer_info> buffer_;
};

}  // namespace

std::vector<kvrank::TensorView> memory_views(const std::vector<MemoryTensor>& tensors,
                                             std::vector<py::buffer_info>& held) {
  std::vector<kvrank::TensorView> views;
  for (const auto& [name, dtype_name, shape, data, copy] : tensors) {
    kvrank::TensorView view = kvrank::app::memory_tensor(name, dtype_name, shape);
    if (!data.is_none()) {
      held.push_back(py::buffer(data).request());
      check_c_order(name, held.back());
      view.bytes = bytes_of(held.back());
    } else {
      const std::uint64_t size = kvrank::checked_byte_count(shape, view.dtype).value();  // checked
      view.deferred = std::make_shared<PythonCopy>(name, size, copy);
    }
    views.push_back(std::move(view));
  }
  return views;
}

}  // namespace kvrank_python
