// CatShape and ForEachCatSlot on plain strided views of a host array: filling each slot with
// its part, element by element, must give what concatenating the parts by hand gives.
#include "tensor/cat_slots.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

// The least strided view: enough for strided_view.h.
struct View {
  Shape shape{0};
  Dims strides{1};
  int64_t offset = 0;
};

// Element [coords] of view `v` of the host array `values`.
int64_t& At(std::vector<int64_t>& values, const View& v, const Dims& coords) {
  int64_t at = v.offset;
  for (size_t d = 0; d < coords.size(); ++d) at += coords[d] * v.strides[d];
  return values[at];
}

int64_t RowMajor(const Dims& coords, const Shape& shape) {
  int64_t at = 0;
  for (int64_t d = 0; d < shape.rank(); ++d) at = at * shape[d] + coords[d];
  return at;
}

bool Next(Dims& coords, const Shape& shape) {
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    if (++coords[d] < shape[d]) return true;
    coords[d] = 0;
  }
  return false;
}

void ExpectCatMatches(const std::vector<Shape>& shapes, int64_t dim) {
  std::vector<View> parts;
  for (const Shape& s : shapes) parts.push_back({s, s.ContiguousStrides(), 0});
  const Shape out_shape = CatShape(absl::Span<const View>(parts), dim);

  // Reference: the output element at coords comes from the part whose range along dim
  // holds coords[dim]; encode (part, its row-major position) as one number.
  std::vector<int64_t> expected(out_shape.numel(), -1);
  int64_t begin = 0;
  for (size_t k = 0; k < shapes.size(); ++k) {
    if (shapes[k].numel() == 0) {
      begin += shapes[k][dim];
      continue;
    }
    Dims coords(shapes[k].rank(), 0);
    int64_t n = 0;
    do {
      Dims out_coords = coords;
      out_coords[dim] += begin;
      expected[RowMajor(out_coords, out_shape)] = static_cast<int64_t>(k) * 1000 + n++;
    } while (Next(coords, shapes[k]));
    begin += shapes[k][dim];
  }
  ASSERT_EQ(out_shape[dim], begin);

  std::vector<int64_t> got(out_shape.numel(), -1);
  const View out{out_shape, out_shape.ContiguousStrides(), 0};
  ForEachCatSlot(out, absl::Span<const View>(parts), dim, [&](const View& part, const View& slot) {
    ASSERT_EQ(part.shape, slot.shape);
    const int64_t k = &part - parts.data();
    Dims coords(part.shape.rank(), 0);
    int64_t n = 0;
    if (part.shape.numel() > 0) {
      do At(got, slot, coords) = k * 1000 + n++;
      while (Next(coords, part.shape));
    }
  });
  EXPECT_EQ(got, expected);
}

TEST(CatSlots, PartsLandWhereConcatenationPutsThem) {
  ExpectCatMatches({Shape{2}, Shape{3}}, 0);
  ExpectCatMatches({Shape{2, 3}, Shape{1, 3}, Shape{4, 3}}, 0);
  ExpectCatMatches({Shape{2, 3}, Shape{2, 1}, Shape{2, 0}, Shape{2, 2}}, 1);
  ExpectCatMatches({Shape{2, 1, 4}, Shape{2, 3, 4}}, 1);
  ExpectCatMatches({Shape{3, 2, 2}, Shape{3, 2, 1}}, 2);
  ExpectCatMatches({Shape{0, 2}, Shape{0, 5}}, 1);
}

}  // namespace
}  // namespace kiln
