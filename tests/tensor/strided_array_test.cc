// StridedArray (tensor/strided_array.h) over stand-in buffers: a host one that offers data()
// and a device-like one that offers address() and context(), as the backends' buffers do.
#include "tensor/strided_array.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace kiln {
namespace {

class HostBytes {
 public:
  explicit HostBytes(int64_t n) : bytes_(static_cast<size_t>(n)) {}
  std::byte* data() const { return const_cast<std::byte*>(bytes_.data()); }

 private:
  std::vector<std::byte> bytes_;
};

struct Queue {
  int id = 0;
};

class DeviceRange {
 public:
  DeviceRange(Queue* queue, uint64_t base) : queue_(queue), base_(base) {}
  uint64_t address() const { return base_; }
  Queue& context() const { return *queue_; }

 private:
  Queue* queue_;
  uint64_t base_;
};

struct HostDevice {};
struct OtherDevice {};

// bool as 32 bits, as Vulkan keeps it.
int64_t WideBool(DType dtype) { return dtype == DType::kBool ? 4 : DTypeSize(dtype); }

using HostArray = StridedArray<HostBytes, HostDevice>;
using DeviceArray = StridedArray<DeviceRange, HostDevice, WideBool>;

static_assert(!std::is_same_v<HostArray, StridedArray<HostBytes, OtherDevice>>,
              "backends that differ in device alone still get distinct primitive types");

HostArray HostDense(const Shape& shape, DType dtype) {
  return HostArray::Dense(std::make_shared<HostBytes>(shape.numel() * DTypeSize(dtype)), shape, dtype, {});
}

TEST(StridedArrayTest, DenseIsRowMajorFromTheStart) {
  const HostArray a = HostDense(Shape({2, 3, 4}), DType::kF32);
  EXPECT_EQ(a.shape, Shape({2, 3, 4}));
  EXPECT_EQ(a.strides, Dims({12, 4, 1}));
  EXPECT_EQ(a.offset, 0);
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.numel(), 24);
  EXPECT_TRUE(a.IsContiguous());
  EXPECT_EQ(a.data(), static_cast<const void*>(a.buffer->data()));
}

TEST(StridedArrayTest, ViewsShareTheBufferAndMoveTheFirstElement) {
  const HostArray a = HostDense(Shape({4, 3}), DType::kF64);
  double* values = a.mutable_data<double>();
  for (int i = 0; i < 12; ++i) values[i] = i;

  const HostArray row2 = strided::Slice(a, 0, 2, 4, 1);
  EXPECT_EQ(row2.buffer, a.buffer);
  EXPECT_EQ(row2.offset, 6);
  EXPECT_EQ(row2.byte_offset(), 6 * 8);
  EXPECT_EQ(*row2.data<double>(), 6.0);
  EXPECT_TRUE(row2.IsContiguous());

  const HostArray column1 = strided::Slice(a, 1, 1, 2, 1);
  EXPECT_EQ(*column1.data<double>(), 1.0);
  EXPECT_FALSE(column1.IsContiguous());

  const int64_t dims[] = {1, 0};
  EXPECT_FALSE(strided::Permute(a, dims).IsContiguous());
}

TEST(StridedArrayTest, NoBufferHasNoData) {
  const HostArray empty;
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.data<float>(), nullptr);
}

TEST(StridedArrayTest, AddressesCountTheBuffersOwnElementSize) {
  Queue queue{.id = 7};
  DeviceArray flags =
      DeviceArray::Dense(std::make_shared<DeviceRange>(&queue, 4096), Shape({8}), DType::kBool, HostDevice{});
  flags.offset = 3;
  EXPECT_EQ(flags.address(), 4096 + 3 * 4);
  EXPECT_EQ(&flags.context(), &queue);
}

}  // namespace
}  // namespace kiln
