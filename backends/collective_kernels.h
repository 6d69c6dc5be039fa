// The data movement of a backend's collectives within a process: how a member's tensor is
// staged as a dense buffer every member's thread (and, across processes, the network engine)
// can address, reduced there, and taken back onto its device. The host-staged engine of
// distributed/ runs on these; a backend takes part by specialising CollectiveKernels in its own
// folder (backends/cpu/collective_kernels.h, backends/vulkan/collective_kernels.h), included
// by backends/registry.h.
#ifndef KILN_BACKENDS_COLLECTIVE_KERNELS_H_
#define KILN_BACKENDS_COLLECTIVE_KERNELS_H_

namespace kiln {

template <class B>
struct CollectiveKernels;  // no collectives for backends that do not specialise this

}  // namespace kiln

#endif  // KILN_BACKENDS_COLLECTIVE_KERNELS_H_
