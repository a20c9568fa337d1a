// The per-layer curves and their means as the result reader reads them (field_reader.hpp): each
// curve of the metric table records the schema_version that introduced it (CurveField::since),
// and a file of an older version may lack it.
#include <algorithm>
#include <limits>
#include <string>

#include "report/field_reader.hpp"

namespace kvrank::report_detail {
namespace {

bool may_be_absent(const CurveField& field, int version) { return version < field.since; }

}  // namespace

void read_curves(const FieldReader& reader, std::span<const CurveField> fields, int version,
                 LayerMetrics& layer, std::vector<Curve>& absent) {
  for (const CurveField& field : fields) {
    const char* key = field.name.data();  // the table's names are string literals
    if (!reader.has(key) && may_be_absent(field, version)) {
      if (std::find(absent.begin(), absent.end(), field.metric) == absent.end())
        absent.push_back(field.metric);
      continue;
    }
    field.set(layer, field.integral ? reader.count(key) : reader.number(key));
  }
}

Summary read_summary(const FieldReader& reader, std::span<const CurveField> fields, int version) {
  std::vector<std::string> keys;
  for (const CurveField& field : fields)
    if (field.mean) keys.push_back(summary_key(field));
  reader.allow_only(std::vector<std::string_view>(keys.begin(), keys.end()));
  Summary summary;
  for (const CurveField& field : fields) {
    if (!field.mean) continue;
    const std::string key = summary_key(field);
    summary.*field.mean = !reader.has(key.c_str()) && may_be_absent(field, version)
                              ? std::numeric_limits<double>::quiet_NaN()
                              : reader.number(key.c_str());
  }
  return summary;
}

}  // namespace kvrank::report_detail
