// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/report.hpp"
#include <stdexcept>
namespace kvrank {
nlohmann::json to_json(const std::vector<ModelReport>&, const ReportOptions&) { throw std::logic_error("not implemented"); }
std::string to_csv(const std::vector<ModelReport>&) { throw std::logic_error("not implemented"); }
std::string to_table(const std::vector<ModelReport>&) { throw std::logic_error("not implemented"); }
std::vector<ModelReport> reports_from_json(const nlohmann::json&, const std::string&) { throw std::logic_error("not implemented"); }
void write_file_atomically(const std::filesystem::path&, const std::string&) { throw std::logic_error("not implemented"); }
}  // namespace kvrank
