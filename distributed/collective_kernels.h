// The data movement of in-process collectives, per backend. A backend takes part in
// distributed/ by specialising CollectiveKernels; the CPU one is cpu_collectives.cc.
#ifndef KILN_DISTRIBUTED_COLLECTIVE_KERNELS_H_
#define KILN_DISTRIBUTED_COLLECTIVE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace kiln::distributed {

enum class ReduceKind { kSum, kMean, kMax, kMin };
const char* ReduceKindName(ReduceKind kind);

template <class B>
struct CollectiveKernels;  // no collectives for backends that do not specialise this

template <>
struct CollectiveKernels<Cpu> {
  using P = Cpu::Primitive;
  // Dense input whose data the other members may read until the round's departure.
  static P Dense(const P& t) { return Cpu::contiguous(t); }
  static const void* Data(const P& dense) {
    return dense.buffer->data() + dense.offset * DTypeSize(dense.dtype);
  }
  static void* MutableData(const P& fresh) { return fresh.buffer->data(); }
  // An output every member will share (CPU devices share memory): no copy per member.
  static P Allocate(const Shape& shape, DType dtype, const CpuDevice& device) {
    return cpu::StridedTensor::Empty(shape, dtype, device);
  }
  static P OnDevice(const P& shared, const CpuDevice& device) {
    P view = shared;
    view.device = device;
    return view;
  }
  // out[begin, end) = op over inputs[m][begin, end), members in order (so every run and every
  // member gets the same bits), divided by the member count for kMean.
  static void Reduce(ReduceKind kind, DType dtype, const std::vector<const void*>& inputs,
                     void* out, int64_t begin, int64_t end, const CpuDevice& device);
  // to[at, at + count) = from[0, count)
  static void CopyInto(DType dtype, const void* from, void* to, int64_t at, int64_t count);
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_COLLECTIVE_KERNELS_H_
