// The NCCL engine's folder as distributed/engines.h includes it: the engine (nccl_engine.h,
// which registers itself for Cuda) where this build has CUDA; otherwise nothing, as there is
// no CUDA device for a group to hold (BUILD.bazel selects the same way).
#ifndef KILN_DISTRIBUTED_NCCL_NCCL_H_
#define KILN_DISTRIBUTED_NCCL_NCCL_H_

#ifdef KILN_WITH_CUDA
#include "distributed/nccl/nccl_engine.h"
#endif

#endif  // KILN_DISTRIBUTED_NCCL_NCCL_H_
