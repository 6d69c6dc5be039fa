// The data-parallel training loop of README.md, compiled with every build so that it stays
// true: an MLP on Fashion-MNIST over two CPU devices.
#include <cstdio>

#include "data/idx.h"
#include "distributed/data_parallel.h"
#include "distributed/group.h"
#include "nn/activation.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/sequential.h"
using namespace kiln;
using AD = Autodiff<Cpu>;  // the CPU backend, with gradients

int main() {
  if (!cpu::Configure({.devices = 2}).ok()) return 1;  // cpu:0 and cpu:1, a core each
  const auto devices = DispatchDevice::ParseList("autodiff(cpu:0),autodiff(cpu:1)").value();
  const auto group = distributed::MakeGroupOf<AD>(devices, distributed::Collective::kGradientSync).value();

  const auto train = data::LoadFashionMnist(data::kFashionMnistDir, "train").value();
  const auto images = Tensor<Cpu>::from_data(train.images).reshape({-1, 784});
  const auto labels = Tensor<Cpu>::from_data(train.labels);

  Generator gen(1);  // same seed, same run, on any backend
  nn::Sequential<AD> model;
  model.add<nn::Linear<AD>>(784, 256, gen).add<nn::ReLU<AD>>().add<nn::Linear<AD>>(256, 10, gen);
  const auto dp = distributed::DataParallel<Cpu>::Create(model, group, [] {
                    return std::make_unique<nn::Sgd<Cpu>>(0.05, nn::SgdOptions{.momentum = 0.9});
                  }).value();
  const auto loss = [](nn::Module<AD>& m, const Tensor<AD>& x, const Tensor<AD>& y) {
    return nn::CrossEntropy(m(x), y);
  };

  for (int epoch = 0; epoch < 3; ++epoch) {
    double sum = 0;
    int steps = 0;
    for (int64_t i = 0; i + 128 <= images.size(0); i += 128, ++steps) {
      // 128 images split 64 + 64; gradients all-reduced during backward.
      sum += dp->Step(images.slice(0, i, i + 128), labels.slice(0, i, i + 128), loss).value();
    }
    std::printf("epoch %d: mean loss %.4f\n", epoch, sum / steps);
  }
}
