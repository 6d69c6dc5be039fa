// nanoGPT's tensor names (what a safetensors header from PyTorch holds) on any bytes: a kiln
// name, "" (a mask or the tied head) or an error naming the input, never a crash; every kiln
// name it gives maps back to the same nanoGPT name.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nn/nanogpt_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const auto kiln = kiln::nn::KilnNameOfNanoGpt(name);
  if (!kiln.ok()) {
    if (kiln.status().message().find(name) == std::string::npos) std::abort();
    return 0;
  }
  if (kiln->empty()) return 0;
  const auto back = kiln::nn::NanoGptName(*kiln);
  if (!back.ok() || *back != name) std::abort();
  return 0;
}
