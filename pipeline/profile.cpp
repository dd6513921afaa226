// profile_layers: how long each layer takes, measured, for partition_by_time (see partition.h).
#include <algorithm>
#include <chrono>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/stream.h"
#include "pipeline/partition.h"

namespace brigade::pipeline {

namespace {

// GPU kernels run asynchronously: wait for them, or the clock measures only the launches.
void wait_for(const Tensor& t) {
  if (t.defined() && t.device().is_cuda()) device_synchronize(t.device());
}

// One layer, forward and backward, on its own tape. Returns the output, cut from the tape.
Tensor run_layer(nn::Module& layer, const Tensor& input) {
  Tensor x = input.detach();
  if (is_floating(x.dtype())) x.requires_grad_(true);  // so backward does the input-gradient work too
  Tape tape;
  Tensor y;
  {
    TapeGuard guard(tape);
    y = layer(x);
  }
  BRIGADE_CHECK(y.defined(), "profile_layers: layer ", layer.name(), " returned an undefined tensor");
  if (y.requires_grad()) tape.backward({y}, {ones_like(y)});
  return y.detach();
}

}  // namespace

std::vector<double> profile_layers(const Layers& layers, const Tensor& sample_input) {
  BRIGADE_CHECK(!layers.empty(), "profile_layers: there are no layers to profile");
  BRIGADE_CHECK(sample_input.defined(), "profile_layers: the sample input is an undefined tensor");
  for (size_t i = 0; i < layers.size(); ++i)
    BRIGADE_CHECK(layers[i] != nullptr, "profile_layers: layer ", i, " is null");

  // Pass 0 warms up; each layer's cost is the median of the measured passes, so one interruption (a
  // busy core, another thread's burst) does not move a stage boundary.
  constexpr int kMeasured = 5;
  std::vector<std::vector<double>> samples(layers.size());
  for (int pass = 0; pass <= kMeasured; ++pass) {
    Tensor x = sample_input;
    for (size_t i = 0; i < layers.size(); ++i) {
      wait_for(x);
      const auto start = std::chrono::steady_clock::now();
      Tensor y;
      try {
        y = run_layer(*layers[i], x);
      } catch (const Error& e) {
        fail("profile_layers: layer ", i, " (", layers[i]->name(), ") failed on input ", shape_str(x.shape()), " ",
             dtype_name(x.dtype()), ": ", e.what());
      }
      wait_for(y);
      if (pass > 0) samples[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      x = y;
    }
  }
  std::vector<double> seconds;
  for (std::vector<double>& s : samples) {
    std::nth_element(s.begin(), s.begin() + kMeasured / 2, s.end());
    seconds.push_back(s[kMeasured / 2]);
  }
  // Profiling is not training: leave no gradients behind.
  for (const auto& layer : layers) layer->zero_grad();
  return seconds;
}

}  // namespace brigade::pipeline
