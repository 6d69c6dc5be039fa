// ReadSafetensors and LoadCheckpoint on any bytes: a status naming the file, never a crash.
// A file that loads into a model and its optimizer must also survive a training step, so
// state that "loads OK" but breaks the step is caught too. Each file is loaded as it is into
// an f32 model, and with dtype conversion into an f32 and a bf16 one (half files convert up,
// f32 files down).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "fuzz/memory_file.h"
#include "nn/checkpoint.h"
#include "nn/linear.h"
#include "nn/optim.h"

namespace {

using kiln::Cpu;
using AD = kiln::Autodiff<Cpu>;

void CheckNamesFile(const absl::Status& status, const std::string& path) {
  if (!status.ok() && status.message().find(path) == std::string::npos) std::abort();
}

// Loads the checkpoint into a fresh Linear(3 -> 2) of `dtype` with `optimizer`; if that
// works, steps.
void LoadAndStep(const std::string& path, kiln::nn::Optimizer<Cpu>* optimizer, kiln::DType dtype,
                 const kiln::nn::LoadOptions& options) {
  kiln::Generator gen(1);
  kiln::nn::Linear<AD> model(3, 2, gen, {.dtype = dtype});
  const absl::Status status = kiln::nn::LoadCheckpoint<Cpu>(path, model, optimizer, options);
  CheckNamesFile(status, path);
  if (!status.ok()) return;
  for (const auto& [name, p] : model.named_parameters()) {
    if (p->dtype() != dtype) std::abort();  // loading converts to the model's dtype, never the reverse
  }
  if (optimizer == nullptr) return;
  const auto x = kiln::Tensor<AD>::from_vector(std::vector<float>{0.5f, -1, 2, 1, 0, -0.25f}, {2, 3}).to(dtype);
  const auto grads = model(x).sum().backward();
  try {
    optimizer->step(model, grads);
  } catch (const kiln::Error&) {
    // The one refusal a valid checkpoint may meet: a step count already at its bound.
    if (optimizer->steps() != kiln::nn::kMaxOptimizerSteps) std::abort();
  }
  // State that broadcasts against its parameter steps without an error, but wrongly: after
  // the step every slot must still have its parameter's shape and dtype.
  for (const auto& [key, state] : optimizer->state()) {
    const std::string path = key.substr(key.find('/') + 1);  // "<slot>/<path>"
    bool fits = false;
    for (const auto& [name, p] : model.named_parameters()) {
      fits |= name == path && p->shape() == state.shape() && p->dtype() == state.dtype();
    }
    if (!fits) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool configured = kiln::cpu::Configure({.devices = 1, .threads_per_device = 1}).ok();
  if (!configured) std::abort();
  const kiln::fuzz::MemoryFile input(data, size);
  const std::string path = input.path();
  const auto file = kiln::nn::ReadSafetensors(path);
  CheckNamesFile(file.status(), path);
  if (file.ok()) {
    const std::pair<kiln::DType, bool> ways[] = {
        {kiln::DType::kF32, false}, {kiln::DType::kF32, true}, {kiln::DType::kBF16, true}};
    for (const auto& [dtype, convert] : ways) {
      const kiln::nn::LoadOptions options{.convert_dtype = convert};
      LoadAndStep(path, nullptr, dtype, options);
      kiln::nn::Sgd<Cpu> sgd(0.1, {.momentum = 0.9});
      LoadAndStep(path, &sgd, dtype, options);
      kiln::nn::AdamW<Cpu> adamw(0.01);
      LoadAndStep(path, &adamw, dtype, options);
    }
  }
  return 0;
}
