// The metrics file a resumed run reads (examples/metrics_log.h's MetricsBytesToKeep) on any
// bytes and resumed step: never a crash; what it keeps is whole lines, each a record whose step
// is at most the resumed one, and keeping is monotonic in the step.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "examples/metrics_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  int64_t step;
  std::memcpy(&step, data, 8);
  if (step < 0) step = -(step + 1);
  const absl::string_view contents(reinterpret_cast<const char*>(data) + 8, size - 8);
  const size_t kept = kiln::MetricsBytesToKeep(contents, step);
  if (kept > contents.size()) std::abort();
  if (kept > 0 && contents[kept - 1] != '\n') std::abort();  // whole lines only
  if (kiln::MetricsBytesToKeep(contents.substr(0, kept), step) != kept) std::abort();
  if (step > 0 && kiln::MetricsBytesToKeep(contents, step - 1) > kept) std::abort();
  return 0;
}
