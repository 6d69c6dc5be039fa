#include "distributed/group.h"

#include "absl/strings/str_cat.h"

namespace kiln::distributed {

const char* GroupOpName(GroupOp op) {
  switch (op) {
    case GroupOp::kAllReduce: return "all_reduce";
    case GroupOp::kBroadcast: return "broadcast";
    case GroupOp::kAllGather: return "all_gather";
    case GroupOp::kReduceScatter: return "reduce_scatter";
    case GroupOp::kGradientSync: return "gradient sync";
  }
  return "?";
}

namespace {

// The device an autodiff device wraps, or the device itself.
const DispatchDevice& Unwrapped(const DispatchDevice& d) {
  if (const auto* a = std::get_if<AutodiffDevice>(&d.variant())) return *a->inner;
  return d;
}

// Whether `backend` can run `op`; every op runs on the CPU backend (and on CUDA, via NCCL).
bool Supports(const std::string& backend, GroupOp) {
#ifdef KILN_WITH_CUDA
  if (backend == "cuda") return true;
#endif
  return backend == "cpu";
}

// The typed group for devices of backend B (plain or autodiff), each checked to exist.
template <class B>
absl::StatusOr<AnyGroup> MakeTyped(absl::Span<const DispatchDevice> devices, GroupOptions options,
                                   absl::Status (*check)(const typename B::Device&)) {
  std::vector<typename B::Device> typed;
  for (const DispatchDevice& d : devices) {
    const auto device = std::get<typename B::Device>(Unwrapped(d).variant());
    if (absl::Status s = check(device); !s.ok()) return s;
    typed.push_back(device);
  }
  if (devices[0].is_autodiff()) {
    return AnyGroup(std::make_shared<DeviceGroup<Autodiff<B>>>(std::move(typed), options));
  }
  return AnyGroup(std::make_shared<DeviceGroup<B>>(std::move(typed), options));
}

}  // namespace

absl::Status ValidateDevices(absl::Span<const DispatchDevice> devices, GroupOp op) {
  const char* what = GroupOpName(op);
  if (devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the device list is empty; give at least one device"));
  }
  const DispatchDevice& first = devices[0];
  for (size_t i = 0; i < devices.size(); ++i) {
    const DispatchDevice& d = devices[i];
    if (d.is_autodiff() && Unwrapped(d).is_autodiff()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": device ", i, " is ", d.ToString(), ", autodiff inside autodiff; wrap a device in "
          "autodiff once"));
    }
    if (d.is_autodiff() != first.is_autodiff()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": device ", i, " is ", d.ToString(), " but device 0 is ", first.ToString(),
          "; a group's devices are all autodiff or none"));
    }
    if (d.backend() != first.backend()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": device ", i, " is ", d.ToString(), " (", d.backend(), ") but device 0 is ",
          first.ToString(), " (", first.backend(), "); a group's devices share one backend"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == d) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": device ", i, " is ", d.ToString(), ", the same device as device ", j,
            "; each device may appear once"));
      }
    }
  }
  if (!Supports(first.backend(), op)) {
    return absl::UnimplementedError(absl::StrCat(what, " is not supported on ", first.backend(),
                                                 " devices (device 0 is ", first.ToString(), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AnyGroup> MakeGroup(absl::Span<const DispatchDevice> devices, GroupOp op,
                                   GroupOptions options) {
  if (absl::Status s = ValidateDevices(devices, op); !s.ok()) return s;
#ifdef KILN_WITH_CUDA
  if (devices[0].backend() == "cuda") return MakeTyped<Cuda>(devices, options, &cuda::CheckDevice);
#endif
  std::vector<CpuDevice> cpu;
  for (const DispatchDevice& d : devices) {
    const DispatchDevice& inner = Unwrapped(d);
    const CpuDevice device = std::get<CpuDevice>(inner.variant());
    if (absl::Status s = cpu::CheckDevice(device); !s.ok()) return s;
    cpu.push_back(device);
  }
  if (devices[0].is_autodiff()) {
    return AnyGroup(std::make_shared<DeviceGroup<Autodiff<Cpu>>>(std::move(cpu), options));
  }
  return AnyGroup(std::make_shared<DeviceGroup<Cpu>>(std::move(cpu), options));
}

}  // namespace kiln::distributed
