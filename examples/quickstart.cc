// The training loop of README.md, compiled with every build so that it stays true.
#include <cstdio>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "data/idx.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/sequential.h"
using namespace kiln;
using AD = Autodiff<Cpu>;                        // the CPU backend, with gradients

int main() {
  auto train = *data::LoadFashionMnist(data::kFashionMnistDir, "train");
  const auto images = Tensor<Cpu>::from_data(train.images).reshape({-1, 784});
  const auto labels = Tensor<Cpu>::from_data(train.labels);

  Generator gen(1);                              // same seed, same run, any backend
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(784, 256, gen).add<nn::ReLU<AD>>()
       .add<nn::Linear<AD>>(256, 10, gen);
  nn::Sgd<Cpu> sgd(0.05, {.momentum = 0.9});

  for (int epoch = 0; epoch < 5; ++epoch) {
    for (int64_t i = 0; i + 64 <= images.size(0); i += 64) {
      const auto x = Tensor<AD>::from_inner(images.slice(0, i, i + 64));
      const auto y = Tensor<AD>::from_inner(labels.slice(0, i, i + 64));
      const Tensor<AD> loss = nn::CrossEntropy(model(x), y);
      sgd.step(model, loss.backward());         // gradients of every parameter
    }
    std::printf("epoch %d done\n", epoch);
  }
}
