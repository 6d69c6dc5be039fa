// CUDA devices cuda:0 .. cuda:N-1 as the CUDA runtime numbers them (CUDA_VISIBLE_DEVICES
// applies). A device value is only a name: whether it exists is checked when it is used.
#ifndef KILN_BACKENDS_CUDA_CUDA_DEVICE_H_
#define KILN_BACKENDS_CUDA_CUDA_DEVICE_H_

#include <string>

#include "absl/status/status.h"

namespace kiln {

class CudaDevice {
 public:
  constexpr CudaDevice() = default;
  constexpr explicit CudaDevice(int index) : index_(index) {}
  int index() const { return index_; }
  std::string ToString() const;  // "cuda:0"
  friend bool operator==(const CudaDevice&, const CudaDevice&) = default;

 private:
  int index_ = 0;
};

namespace cuda {

// The number of CUDA devices, 0 when there is no GPU or no usable driver.
int DeviceCount();

// OK when this process can use CUDA devices; otherwise FailedPrecondition saying why, with the
// CUDA error string (e.g. "no CUDA device is available (cudaGetDeviceCount: ...)").
absl::Status Available();

// OK if `device` exists; otherwise InvalidArgument, e.g. "cuda:0 does not exist: no CUDA
// device is available (cudaGetDeviceCount: ...)" or "cuda:4 does not exist: this machine
// has 2 CUDA devices (cuda:0..cuda:1)".
absl::Status CheckDevice(const CudaDevice& device);

}  // namespace cuda
}  // namespace kiln

#endif  // KILN_BACKENDS_CUDA_CUDA_DEVICE_H_
