// Debian's libgloo-dev (0.0~git20220518) installs gloo/transport/tcp/pair.h and context.h,
// which include gloo/common/memory.h, but not that header itself. kiln needs the TCP pair's
// declaration (distributed/gloo/mesh.cc), which holds these two pointer boxes as members, so
// they are declared here with the library's layout: a std::shared_ptr and a std::weak_ptr.
// Only the layout matters: kiln calls none of their members; the library's own code does.
#pragma once

#include <memory>

namespace gloo {

template <typename T>
class ShareableNonOwningPtr;

template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;

 private:
  std::shared_ptr<T> ptr_;
};

template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;

 protected:
  std::weak_ptr<T> ptr_;
};

}  // namespace gloo
