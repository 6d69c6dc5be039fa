// The CPU backend's collective kernels (backends/collective_kernels.h): members share memory,
// so a tensor is staged in place and an output every member writes a part of is shared; and
// the host reductions every host-staged backend and the Gloo engine use.
#ifndef KILN_BACKENDS_CPU_COLLECTIVE_KERNELS_H_
#define KILN_BACKENDS_CPU_COLLECTIVE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "backends/collective_kernels.h"
#include "backends/cpu/cpu_backend.h"

namespace kiln {

// out[begin, end) = op over inputs[m][begin, end) in host memory, members in order (so every
// run and every member gets the same bits), divided by the member count for kMean. One thread;
// a backend that stages through the host calls this from each member's own thread.
void ReduceOnHost(ReduceOp kind, DType dtype, const std::vector<const void*>& inputs, void* out, int64_t begin,
                  int64_t end);
// data[begin, end) /= by (the division of a mean, after a cross-process sum).
void DivideOnHost(DType dtype, void* data, int64_t begin, int64_t end, int64_t by);

template <>
struct CollectiveKernels<Cpu> {
  using P = Cpu::Primitive;
  using Staged = cpu::StridedTensor;
  // Unstage shares the staged memory rather than copying it, so members need not wait for
  // each other's parts of a shared output before they unstage it.
  static constexpr bool kUnstageCopies = false;
  // A dense form of `t` whose data the other members may read until the round's departure.
  static Staged Stage(const P& t) { return Cpu::contiguous(t); }
  static const void* Data(const Staged& dense) { return dense.buffer->data() + dense.offset * DTypeSize(dense.dtype); }
  static void* MutableData(const Staged& fresh) { return fresh.buffer->data(); }
  // An output every member will share (CPU devices share memory): no copy per member.
  static Staged Allocate(const Shape& shape, DType dtype, const CpuDevice& device) {
    return cpu::StridedTensor::Empty(shape, dtype, device);
  }
  // Whether a collective that consumed its input may write its result into `staged`: nothing
  // refers to that memory but the group's slot and the consumed tensor (a staged view of a
  // larger buffer is never written).
  static bool Writable(const Staged& staged) { return staged.offset == 0 && staged.buffer.use_count() <= 2; }
  static P Unstage(const Staged& shared, const CpuDevice& device) {
    P view = shared;
    view.device = device;
    return view;
  }
  // ReduceOnHost, split over the device's threads.
  static void Reduce(ReduceOp kind, DType dtype, const std::vector<const void*>& inputs, void* out, int64_t begin,
                     int64_t end, const CpuDevice& device);
  // data[0, count) /= by, split over the device's threads.
  static void Divide(DType dtype, void* data, int64_t count, int64_t by, const CpuDevice& device);
  // to[at, at + count) = from[0, count)
  static void CopyInto(DType dtype, const void* from, void* to, int64_t at, int64_t count);
};

}  // namespace kiln

#endif  // KILN_BACKENDS_CPU_COLLECTIVE_KERNELS_H_
