#include "kvrank/base/error.hpp"

#include "support/catch.hpp"

TEST_CASE("Error formats file, tensor and detail") {
  kvrank::Error error("model.safetensors", "model.layers.0.self_attn.q_proj.weight",
                      "contains NaN");
  CHECK(std::string(error.what()) ==
        "model.safetensors: model.layers.0.self_attn.q_proj.weight: contains NaN");
  CHECK(std::string(kvrank::Error("a.npy", "bad magic").what()) == "a.npy: bad magic");
}
