// DispatchDevice::Parse and ParseList on any bytes: a status, never a crash. Whatever parses
// must print back to a string that parses to the same device.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cpu/cpu_device.h"
#include "backends/dispatch/dispatch_device.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool configured = kiln::cpu::Configure({.devices = 4, .threads_per_device = 1}).ok();
  if (!configured) std::abort();
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (const auto device = kiln::DispatchDevice::Parse(text); device.ok()) {
    const auto again = kiln::DispatchDevice::Parse(device->ToString());
    if (!again.ok() || !(*again == *device)) std::abort();
  }
  if (const auto list = kiln::DispatchDevice::ParseList(text); list.ok()) {
    if (list->empty() || list->size() > kiln::DispatchDevice::kMaxListLength) std::abort();
  }
  return 0;
}
