// The Vulkan backend's collective kernels (backends/collective_kernels.h), staged through host
// memory: each member downloads its input,
// the members reduce their chunks on the host (in member order, as on the CPU), and each
// uploads the result to its own device. Virtual devices are separate logical devices that
// cannot read each other's memory, and host staging is also what a cross-process engine
// (Gloo) needs.
#ifndef KILN_BACKENDS_VULKAN_COLLECTIVE_KERNELS_H_
#define KILN_BACKENDS_VULKAN_COLLECTIVE_KERNELS_H_

#include "backends/cpu/collective_kernels.h"
#include "backends/vulkan/vulkan_backend.h"

namespace kiln {

template <>
struct CollectiveKernels<Vulkan> {
  using P = Vulkan::Primitive;
  using Staged = cpu::StridedTensor;
  using Host = CollectiveKernels<Cpu>;
  static constexpr bool kUnstageCopies = true;  // uploads: every part must be written first

  static Staged Stage(const P& t) {
    Staged host = cpu::StridedTensor::Empty(t.shape, t.dtype, CpuDevice(0));
    vulkan::ToHost(t, host.buffer->data());
    return host;
  }
  static const void* Data(const Staged& s) { return Host::Data(s); }
  static void* MutableData(const Staged& s) { return Host::MutableData(s); }
  static Staged Allocate(const Shape& shape, DType dtype, const VulkanDevice&) {
    return cpu::StridedTensor::Empty(shape, dtype, CpuDevice(0));
  }
  static P Unstage(const Staged& s, const VulkanDevice& device) {
    return vulkan::FromHost(Host::Data(s), s.shape, s.dtype, device);
  }
  // Each member's own thread reduces its chunk: the members are the parallelism.
  static void Reduce(ReduceOp kind, DType dtype, const std::vector<const void*>& inputs, void* out, int64_t begin,
                     int64_t end, const VulkanDevice&) {
    ReduceOnHost(kind, dtype, inputs, out, begin, end);
  }
  static void Divide(DType dtype, void* data, int64_t count, int64_t by, const VulkanDevice&) {
    DivideOnHost(dtype, data, 0, count, by);
  }
  static void CopyInto(DType dtype, const void* from, void* to, int64_t at, int64_t count) {
    Host::CopyInto(dtype, from, to, at, count);
  }
};

}  // namespace kiln

#endif  // KILN_BACKENDS_VULKAN_COLLECTIVE_KERNELS_H_
