// What examples/gpt and examples/train say about memory: each local device's tensor bytes
// (the backend's memory_usage, backends/registry.h) and the process's resident set
// (process_memory.h), in the progress line and in the final JSON line.
#ifndef KILN_EXAMPLES_MEMORY_REPORT_H_
#define KILN_EXAMPLES_MEMORY_REPORT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "examples/process_memory.h"
#include "tensor/memory_usage.h"

namespace kiln {

template <class B>
std::vector<MemoryUsage> DeviceMemory(const std::vector<typename B::Device>& devices) {
  std::vector<MemoryUsage> usage;
  for (const auto& d : devices) usage.push_back(B::memory_usage(d));
  return usage;
}

// "mem 12.3/15.0 MiB, rss 95.2 MiB": each device's current/peak tensor bytes (comma-separated,
// in the unit of the largest peak), then the resident set.
std::string MemoryProgress(absl::Span<const MemoryUsage> devices, const ProcessMemory& process);

// ,"peak_bytes":[one number per device],"peak_rss_bytes":N
std::string MemoryJsonFields(absl::Span<const MemoryUsage> devices, const ProcessMemory& process);

// MemoryProgress of `devices` and this process at the time it is called (for Progress).
template <class B>
std::function<std::string()> MemoryStatus(std::vector<typename B::Device> devices) {
  return [devices = std::move(devices)] { return MemoryProgress(DeviceMemory<B>(devices), ReadProcessMemory()); };
}

}  // namespace kiln

#endif  // KILN_EXAMPLES_MEMORY_REPORT_H_
