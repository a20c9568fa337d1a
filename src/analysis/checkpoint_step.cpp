// checkpoint_step (analysis.hpp): the training step of a checkpoint, from its folder's name or the
// trainer_state.json a Hugging Face Trainer saves beside the weights.
#include <cstdint>
#include <system_error>

#include "base/json_strict.hpp"
#include "kvrank/analysis/analysis.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/report/training_run.hpp"

namespace kvrank {

std::optional<std::int64_t> checkpoint_step(const std::filesystem::path& path) {
  if (const auto step = step_from_path(path.string())) return step;
  std::error_code error;
  const std::filesystem::path folder =
      std::filesystem::is_directory(path, error) ? path : path.parent_path();
  const std::filesystem::path state = folder / "trainer_state.json";
  if (!std::filesystem::exists(state, error)) return std::nullopt;
  const nlohmann::json document = read_json_object(state);
  const auto found = document.find("global_step");
  // nlohmann reads a non-negative integer as unsigned; a negative one, or a float, is not.
  const bool valid = found != document.end() && found->is_number_unsigned() &&
                     found->get<std::uint64_t>() <= std::uint64_t{INT64_MAX};
  if (!valid) {
    throw Error(state.string(), "global_step: expected a non-negative integer, found " +
                                    (found == document.end() ? std::string("nothing")
                                                             : detail::json_excerpt(*found)));
  }
  return found->get<std::int64_t>();
}

}  // namespace kvrank
