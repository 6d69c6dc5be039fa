#include "backends/dispatch/dispatch_device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln {
namespace {

// Backends kiln knows, and the Bazel config that compiles each in.
struct KnownBackend {
  const char* name;
  const char* config;  // null: always built
  bool compiled;
};

constexpr KnownBackend kBackends[] = {
    {"cpu", nullptr, true},
#ifdef KILN_WITH_VULKAN
    {"vulkan", "vulkan", true},
#else
    {"vulkan", "vulkan", false},
#endif
    {"cuda", "cuda", false},
};

std::string CompiledList() {
  std::string out;
  for (const auto& b : kBackends) {
    if (b.compiled) absl::StrAppend(&out, out.empty() ? "" : ", ", b.name);
  }
  return out;
}

}  // namespace

DispatchDevice DispatchDevice::Autodiff(DispatchDevice inner) {
  return DispatchDevice(Variant(AutodiffDevice{std::make_shared<const DispatchDevice>(std::move(inner))}));
}

absl::StatusOr<DispatchDevice> DispatchDevice::Parse(absl::string_view text) {
  absl::string_view body = text;
  if (absl::ConsumePrefix(&body, "autodiff(")) {
    if (!absl::ConsumeSuffix(&body, ")")) {
      return absl::InvalidArgumentError(absl::StrCat("device '", text, "': autodiff( has no closing )"));
    }
    absl::StatusOr<DispatchDevice> inner = Parse(body);
    if (!inner.ok()) return inner.status();
    return Autodiff(*std::move(inner));
  }
  const size_t colon = body.find(':');
  int index = -1;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(body.substr(colon + 1), &index) || index < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", text, "' is not of the form backend:index (e.g. cpu:0)"));
  }
  const absl::string_view name = body.substr(0, colon);
  for (const auto& b : kBackends) {
    if (name != b.name) continue;
    if (!b.compiled) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device '", text, "': this build has no ", name, " backend; rebuild with --config=",
          b.config, " (compiled in: ", CompiledList(), ")"));
    }
    if (name == "cpu") {
      const CpuDevice device(index);
      if (absl::Status s = cpu::CheckDevice(device); !s.ok()) return s;
      return DispatchDevice(device);
    }
#ifdef KILN_WITH_VULKAN
    if (name == "vulkan") {
      const VulkanDevice device(index);
      if (absl::Status s = vulkan::CheckDevice(device); !s.ok()) return s;
      return DispatchDevice(device);
    }
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat("device '", text, "': unknown backend '", name,
                                                 "'; kiln knows cpu, vulkan and cuda (compiled in: ",
                                                 CompiledList(), ")"));
}

absl::StatusOr<std::vector<DispatchDevice>> DispatchDevice::ParseList(absl::string_view text) {
  std::vector<DispatchDevice> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<DispatchDevice> d = Parse(absl::StripAsciiWhitespace(part));
    if (!d.ok()) return d.status();
    out.push_back(*std::move(d));
  }
  return out;
}

std::string DispatchDevice::backend() const {
  return std::visit([](const auto& d) -> std::string {
    using D = std::decay_t<decltype(d)>;
    if constexpr (std::is_same_v<D, AutodiffDevice>) {
      return d.inner->backend();
    } else {
      const std::string name = d.ToString();
      return name.substr(0, name.find(':'));
    }
  }, v_);
}

std::string DispatchDevice::ToString() const {
  return std::visit([](const auto& d) -> std::string {
    if constexpr (std::is_same_v<std::decay_t<decltype(d)>, AutodiffDevice>) {
      return absl::StrCat("autodiff(", d.inner->ToString(), ")");
    } else {
      return d.ToString();
    }
  }, v_);
}

bool operator==(const AutodiffDevice& a, const AutodiffDevice& b) { return *a.inner == *b.inner; }

bool operator==(const DispatchDevice& a, const DispatchDevice& b) { return a.v_ == b.v_; }

}  // namespace kiln
