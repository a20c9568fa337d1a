// The square oneDNN product the benchmark programs (limit.cpp, bf16_gram.cpp) rate a machine by:
// C = A·B of n × n × n with inputs of one data type and a float32 result, built once, timed per
// call.
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
        // 0x3F80 (bf16) and 0x3C00 (f16) are 1.0: the values do not change the time.
        a_(static_cast<std::size_t>(n * n),
           type == dnnl::memory::data_type::bf16 ? std::uint16_t(0x3F80) : std::uint16_t(0x3C00)),
        b_(a_),
        c_(static_cast<std::size_t>(n * n)) {
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
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<std::uint16_t> a_, b_;
  std::vector<float> c_;
  dnnl::matmul product_;
  dnnl::memory a_memory_, b_memory_, c_memory_;
};

}  // namespace kvrank_bench
#endif
