// A test's Gram backend (gram_backend.hpp), restored when the test ends.
#pragma once

#include "kvrank/metric/gram_backend.hpp"

namespace kvrank::test {

/// Restores the backend in force when a test ends.
class BackendGuard {
 public:
  BackendGuard() : saved_(gram_backend()) {}
  ~BackendGuard() { set_gram_backend(saved_); }
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  GramBackend saved_;
};

}  // namespace kvrank::test
