// StridedArray: the tensor of every backend. A strided view (shape, strides, offset) of a buffer
// the backend allocates and views share, so transpose, permute, slice and expand cost no copy
// (strided_view.h has those ops). Buffers are never written after the op that made them
// returns, which is what makes sharing them safe.
//
// A backend supplies only what is its own:
//   Buffer       its memory: `std::byte* data()` (host or device pointer: data() below) or
//                `uint64_t address()` (a device address: address() below);
//   Device       its device type;
//   ElementSize  bytes per element of a dtype in Buffer (Vulkan keeps bool as 32 bits);
//   Empty        a definition (an explicit specialization) that allocates a Buffer and returns
//                Dense(...).
// Each backend's Buffer and Device are types of its own, so each backend's StridedArray is a
// distinct type: Dispatch and the registry find a tensor's backend by that type.
#ifndef KILN_TENSOR_STRIDED_ARRAY_H_
#define KILN_TENSOR_STRIDED_ARRAY_H_

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/strided_view.h"

namespace kiln {

template <class Buffer>
concept PointerBuffer = requires(const Buffer& b) {
  { b.data() } -> std::same_as<std::byte*>;
};
template <class Buffer>
concept AddressBuffer = requires(const Buffer& b) {
  { b.address() } -> std::same_as<uint64_t>;
};

template <class Buffer, class Device, int64_t (*ElementSize)(DType) = DTypeSize>
struct StridedArray {
  std::shared_ptr<Buffer> buffer;
  Shape shape{0};
  Dims strides{1};     // in elements; 0 for a broadcast dim
  int64_t offset = 0;  // in elements
  DType dtype = DType::kF32;
  Device device;

  // A fresh row-major array (contents uninitialised). Each backend defines it.
  static StridedArray Empty(const Shape& shape, DType dtype, const Device& device);

  // The row-major array of `shape` from the start of `buffer`.
  static StridedArray Dense(std::shared_ptr<Buffer> buffer, const Shape& shape, DType dtype, const Device& device) {
    StridedArray a;
    a.buffer = std::move(buffer);
    a.shape = shape;
    a.strides = shape.ContiguousStrides();
    a.dtype = dtype;
    a.device = device;
    return a;
  }

  int64_t numel() const { return shape.numel(); }
  bool IsContiguous() const { return strided::IsContiguous(shape, strides); }
  // Bytes from the start of the buffer to element [0, ..., 0].
  int64_t byte_offset() const { return offset * ElementSize(dtype); }

  // Element [0, ..., 0] of a pointer buffer, as a T (untyped by default); null with no buffer.
  template <class T = void>
  const T* data() const requires PointerBuffer<Buffer> {
    return mutable_data<T>();
  }
  // Only for an array this op just created.
  template <class T = void>
  T* mutable_data() const requires PointerBuffer<Buffer> {
    if (buffer == nullptr) return nullptr;
    return static_cast<T*>(static_cast<void*>(buffer->data() + byte_offset()));
  }

  // The device address of element [0, ..., 0] of an address buffer.
  uint64_t address() const requires AddressBuffer<Buffer> { return buffer->address() + byte_offset(); }
  // The context a buffer belongs to, for buffers that have one (Vulkan's queue and pools).
  decltype(auto) context() const requires requires(const Buffer& b) { b.context(); }
  { return buffer->context(); }
};

}  // namespace kiln

#endif  // KILN_TENSOR_STRIDED_ARRAY_H_
