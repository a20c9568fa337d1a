// The square oneDNN product the benchmark programs (limit.cpp, bf16_gram.cpp) rate a machine by:
// C = A·B of n × n × n with inputs of one data type (bf16, f16 or f32) and a float32 result, built
// once, timed per call.
#pragma once

#ifdef KVRANK_HAVE_DNNL
#include <chrono>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <vector>

namespace kvrank_bench {

class OnednnSquare {
 public:
  /// The product of n × n inputs of `type`; throws dnnl::error when this oneDNN has no kernel for
  /// it here.
  OnednnSquare(long n, dnnl::memory::data_type type)
      : engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_),
        // Inputs of 1.0 (the values do not change the time): 0x3F80 in bf16, 0x3C00 in f16, and
        // 0x3F800000 in f32, two words of this array a value.
        a_(static_cast<std::size_t>(type == dnnl::memory::data_type::f32 ? 2 * n * n : n * n),
           one_of(type)),
        b_(a_),
        c_(static_cast<std::size_t>(n * n)) {
    if (type == dnnl::memory::data_type::f32) {
      for (std::size_t i = 0; i < a_.size(); i += 2) a_[i] = b_[i] = 0;  // the low halves
    }
    using dnnl::memory;
    const memory::desc a_desc({n, n}, type, memory::format_tag::ab);
    const memory::desc c_desc({n, n}, memory::data_type::f32, memory::format_tag::ab);
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc descriptor(engine_, a_desc, a_desc, c_desc);
#else
    const dnnl::matmul::primitive_desc descriptor(dnnl::matmul::desc(a_desc, a_desc, c_desc),
                                                  engine_);
#endif
    product_ = dnnl::matmul(descriptor);
    a_memory_ = memory(a_desc, engine_, a_.data());
    b_memory_ = memory(a_desc, engine_, b_.data());
    c_memory_ = memory(c_desc, engine_, c_.data());
  }

  /// Seconds of one product.
  double seconds() {
    const auto start = std::chrono::steady_clock::now();
    product_.execute(
        stream_,
        {{DNNL_ARG_SRC, a_memory_}, {DNNL_ARG_WEIGHTS, b_memory_}, {DNNL_ARG_DST, c_memory_}});
    stream_.wait();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count();
  }

 private:
  static std::uint16_t one_of(dnnl::memory::data_type type) {
    return type == dnnl::memory::data_type::f16 ? std::uint16_t(0x3C00) : std::uint16_t(0x3F80);
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<std::uint16_t> a_, b_;
  std::vector<float> c_;
  dnnl::matmul product_;
  dnnl::memory a_memory_, b_memory_, c_memory_;
};

}  // namespace kvrank_bench
#endif
