// cat, gather, index_select and scatter_add. Index values are user data living on the device:
// a kernel checks them all first and the host reads back the first bad position (a
// synchronising read), so an out-of-range index throws OutOfRange exactly as on the CPU and
// no kernel ever reads or writes through one.
#include <limits>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"
#include "tensor/cat_slots.h"
#include "tensor/half_in_f32.h"
#include "tensor/index_check.h"

namespace kiln {

using cuda::StridedTensor;

namespace {

void CheckIndices(const StridedTensor& index, int64_t size, const char* what, const Shape& source) {
  const int64_t n = index.shape.numel();
  if (n == 0) return;
  cuda::DeviceContext& c = cuda::Context(index.device);
  if (c.capturing.load(std::memory_order_acquire)) [[unlikely]] {
    cuda::ThrowCaptureRefusal(c, absl::StrCat(what, " (the index range check)").c_str());
  }
  cuda::Await(c, {&index});
  const auto layout = cuda::IndexFor<1>(index.shape, {index.strides}, what);
  cuda::DeviceBuffer flag(index.device, sizeof(unsigned long long));
  cuda::ThrowIfCuda(cudaMemsetAsync(flag.data(), 0xff, sizeof(unsigned long long), c.stream),
                    absl::StrCat(what, ": cudaMemsetAsync"));
  auto* first_bad = reinterpret_cast<unsigned long long*>(flag.data());
  cuda::CheckLaunch(
      cuda::kernels::CheckIndices(static_cast<const int64_t*>(index.data()), layout, n, size, first_bad, c.stream),
      what, index.device);
  unsigned long long position = 0;
  cuda::ReadBack(c, first_bad, &position, sizeof(position), what);
  if (position == std::numeric_limits<unsigned long long>::max()) return;
  int64_t offset = 0;
  layout.Offsets(static_cast<int64_t>(position), &offset);
  int64_t value = 0;
  cuda::ReadBack(c, static_cast<const int64_t*>(index.data()) + offset, &value, sizeof(value), what);
  ThrowIndexOutOfRange(what, value, static_cast<int64_t>(position), size, source);
}

}  // namespace

Cuda::Primitive Cuda::cat(absl::Span<const Primitive> parts, int64_t dim) {
  StridedTensor out = StridedTensor::Empty(CatShape(parts, dim), parts[0].dtype, parts[0].device);
  // Each part is written into its slot of the output as a strided view (no temporary).
  ForEachCatSlot(out, parts, dim, [](const StridedTensor& part, const StridedTensor& slot) {
    cuda::CopyInto(part, slot.mutable_data(), slot.strides, slot.dtype);
  });
  return out;
}

Cuda::Primitive Cuda::gather(const Primitive& p, int64_t dim, const Primitive& index) {
  CheckIndices(index, p.shape[dim], "gather", p.shape);
  cuda::DeviceContext& c = cuda::Context(p.device);
  cuda::Await(c, {&p});
  StridedTensor out = StridedTensor::Empty(index.shape, p.dtype, p.device);
  Dims source(p.strides.begin(), p.strides.end());
  const int64_t step = source[dim];
  source[dim] = 0;  // the index supplies the coordinate along dim
  const auto walk = cuda::IndexFor<3>(index.shape, {out.strides, index.strides, source}, "gather");
  cuda::CheckLaunch(cuda::kernels::Gather(p.dtype, p.data(), static_cast<const int64_t*>(index.data()),
                                          out.mutable_data(), walk, index.shape.numel(), step, c.stream),
                    "gather", p.device);
  return out;
}

Cuda::Primitive Cuda::index_select(const Primitive& p, int64_t dim, const Primitive& index) {
  CheckIndices(index, p.shape[dim], "index_select", p.shape);
  cuda::DeviceContext& c = cuda::Context(p.device);
  cuda::Await(c, {&p});
  Dims dims(p.shape.dims().begin(), p.shape.dims().end());
  dims[dim] = index.shape[0];
  const Shape shape(dims);
  StridedTensor out = StridedTensor::Empty(shape, p.dtype, p.device);
  // A gather whose index is the 1-D index broadcast along every other dim.
  Dims ids(shape.rank(), 0);
  ids[dim] = index.strides[0];
  Dims source(p.strides.begin(), p.strides.end());
  const int64_t step = source[dim];
  source[dim] = 0;
  const auto walk = cuda::IndexFor<3>(shape, {out.strides, ids, source}, "index_select");
  cuda::CheckLaunch(cuda::kernels::Gather(p.dtype, p.data(), static_cast<const int64_t*>(index.data()),
                                          out.mutable_data(), walk, shape.numel(), step, c.stream),
                    "index_select", p.device);
  return out;
}

Cuda::Primitive Cuda::scatter_add(const Primitive& src, int64_t dim, const Primitive& index, const Shape& shape) {
  // Half atomics would round at every add: the halves add in f32 and round once.
  if (IsHalf(src.dtype)) return HalfInF32<Cuda>::scatter_add(src, dim, index, shape);
  CheckIndices(index, shape[dim], "scatter_add", shape);
  cuda::DeviceContext& c = cuda::Context(src.device);
  cuda::Await(c, {&src});
  StridedTensor out = full(shape, 0, src.dtype, src.device);
  Dims target(out.strides.begin(), out.strides.end());
  const int64_t step = target[dim];
  target[dim] = 0;
  const auto walk = cuda::IndexFor<3>(index.shape, {target, index.strides, src.strides}, "scatter_add");
  cuda::CheckLaunch(cuda::kernels::ScatterAdd(src.dtype, src.data(), static_cast<const int64_t*>(index.data()),
                                              out.mutable_data(), walk, index.shape.numel(), step, c.stream),
                    "scatter_add", src.device);
  return out;
}

}  // namespace kiln
