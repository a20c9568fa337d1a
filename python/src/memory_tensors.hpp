// A state dict in memory as the library reads it (Checkpoint::from_memory): a TensorView per
// entry, viewing the caller's memory where it can be read as it lies, or produced when the library
// reads it through a Python function that copies it (python/kvrank/_tensors.py says which).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "kvrank/io/tensor.hpp"  // TensorView, DeferredBytes (which PythonCopy implements)

namespace kvrank_python {

/// One entry of a state dict as python/kvrank/_tensors.py hands it over: its name, its safetensors
/// dtype name ("F32", "BF16" …), its shape, then either `data` — an object whose buffer holds its
/// bytes in C order (a numpy array; bf16 torch tensors as their int16 bit patterns) — or, with
/// `data` None, `copy`: a function returning such an object (a CPU copy), or raising
/// kvrank.Error for what cannot be read.
using MemoryTensor = std::tuple<std::string, std::string, std::vector<std::int64_t>,
                                pybind11::object, pybind11::object>;

/// The views of `tensors`, in order. The buffers of the entries read as they lie are appended to
/// `held`, which must outlive the views; a copied entry's bytes are made on first use and dropped
/// when the library releases the tensor after its layer (Checkpoint::release). Call with the GIL
/// held; the views may be read without it. Throws kvrank::Error for an unknown dtype name
/// (app::memory_tensor) or a buffer that is not one C-ordered block.
std::vector<kvrank::TensorView> memory_views(const std::vector<MemoryTensor>& tensors,
                                             std::vector<pybind11::buffer_info>& held);

}  // namespace kvrank_python
