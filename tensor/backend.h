// The Backend concept: what a struct must provide to run kiln tensors. A backend is a plain
// struct with a Device type, a tensor Primitive, metadata accessors and the static operations
// listed in tensor/op_table.h, where each op's signature and preconditions are written once.
#ifndef KILN_TENSOR_BACKEND_H_
#define KILN_TENSOR_BACKEND_H_

#include <concepts>
#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "tensor/dtype.h"
#include "tensor/op_table.h"
#include "tensor/ops.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/tensor_data.h"

namespace kiln {

// A device: a value that names one place tensors live ("cpu:0"), comparable and printable.
template <class D>
concept DeviceType = std::regular<D> && requires(const D& d) {
  { d.ToString() } -> std::convertible_to<std::string>;
};

// The requirement that B::name has exactly the signature of row `name` of the op table, with
// Primitive and Device read as B's: one concept per op, so that a backend lacking an op, or
// declaring it otherwise, fails to compile with a note naming it ("required for the
// satisfaction of 'kiln::has_op::matmul<B>'") and the two signatures.
#define KILN_OP_REQUIREMENT(Result, name, params, args)                                  \
  namespace op_signature {                                                               \
  template <class B>                                                                     \
  struct name {                                                                          \
    using Primitive = typename B::Primitive;                                             \
    using Device = typename B::Device;                                                   \
    using type = Result(*) params;                                                       \
  };                                                                                     \
  }                                                                                      \
  namespace has_op {                                                                     \
  template <class B>                                                                     \
  concept name = std::same_as<decltype(&B::name), typename op_signature::name<B>::type>; \
  }
#define KILN_HAS_OP(Result, name, params, args) has_op::name<B>&&

KILN_CORE_OPS(KILN_OP_REQUIREMENT)

template <class B>
concept Backend = DeviceType<typename B::Device> && std::copyable<typename B::Primitive> &&
    std::default_initializable<typename B::Primitive> && requires(const typename B::Primitive& p) {
  { B::Name() } -> std::convertible_to<std::string_view>;
  // Metadata.
  { B::shape(p) } -> std::convertible_to<const Shape&>;
  { B::dtype(p) } -> std::same_as<DType>;
  { B::device(p) } -> std::convertible_to<typename B::Device>;
} && KILN_CORE_OPS(KILN_HAS_OP)
true;  // the ops of tensor/op_table.h

}  // namespace kiln

#endif  // KILN_TENSOR_BACKEND_H_
