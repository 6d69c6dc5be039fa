// The main of the CUDA benchmarks: without a usable CUDA device it says why and exits 0 (a
// machine without a GPU is no failure); otherwise it runs the benchmarks linked in.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "backends/cuda/context.h"

int main(int argc, char** argv) {
  if (const absl::Status s = kiln::cuda::Available(); !s.ok()) {
    const std::string program = argv[0];
    std::printf("%s: skipped: no CUDA device: %s\n", program.substr(program.find_last_of('/') + 1).c_str(),
                std::string(s.message()).c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
