// profile_layers: how long each layer takes and what it stashes, measured, for partition_by_time
// and partition_within_memory (see partition.h).
#include <algorithm>
#include <chrono>

#include "core/host_memory.h"
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

// Bytes allocated since construction and still held: on a GPU the caching allocator's count (all
// of this device's tensors, so nothing else may run meanwhile), on the CPU this thread's account.
class HeldSince {
 public:
  explicit HeldSince(Device device)
      : device_(device),
        account_(std::make_shared<HostMemoryAccount>()),
        scope_(device.is_cuda() ? nullptr : account_),
        start_(device.is_cuda() ? int64_t(cuda_memory_stats(device).allocated) : 0) {}
  int64_t bytes() const {
    return device_.is_cuda() ? int64_t(cuda_memory_stats(device_).allocated) - start_ : int64_t(account_->allocated());
  }

 private:
  Device device_;
  std::shared_ptr<HostMemoryAccount> account_;
  HostMemoryScope scope_;
  int64_t start_;
};

struct LayerRun {
  Tensor output;           // cut from the tape
  int64_t stash_bytes;     // what the forward left for the backward: saved tensors and the output
  double forward_seconds;  // the forward alone (its stash measurement included: a few atomic reads)
};

// One layer, forward and backward, on its own tape.
LayerRun run_layer(nn::Module& layer, const Tensor& input) {
  Tensor x = input.detach();
  if (is_floating(x.dtype())) x.requires_grad_(true);  // so backward does the input-gradient work too
  Tape tape;
  Tensor y;
  int64_t stash = 0;
  const auto start = std::chrono::steady_clock::now();
  {
    HeldSince held(x.device());
    {
      TapeGuard guard(tape);
      y = layer(x);
    }
    wait_for(y);
    stash = std::max<int64_t>(0, held.bytes());
  }
  const double forward = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BRIGADE_CHECK(y.defined(), "profile_layers: layer ", layer.name(), " returned an undefined tensor");
  if (y.requires_grad()) tape.backward({y}, {ones_like(y)});
  return {y.detach(), stash, forward};
}

}  // namespace

std::vector<double> profile_layers(const Layers& layers, const Tensor& sample_input) {
  std::vector<double> seconds;
  for (const LayerProfile& p : profile_layer_costs(layers, sample_input)) seconds.push_back(p.seconds);
  return seconds;
}

std::vector<LayerProfile> profile_layer_costs(const Layers& layers, const Tensor& sample_input) {
  BRIGADE_CHECK(!layers.empty(), "profile_layers: there are no layers to profile");
  BRIGADE_CHECK(sample_input.defined(), "profile_layers: the sample input is an undefined tensor");
  for (size_t i = 0; i < layers.size(); ++i)
    BRIGADE_CHECK(layers[i] != nullptr, "profile_layers: layer ", i, " is null");

  // Pass 0 warms up; each layer's cost is the median of the measured passes, so one interruption (a
  // busy core, another thread's burst) does not move a stage boundary.
  constexpr int kMeasured = 5;
  std::vector<std::vector<double>> samples(layers.size()), forwards(layers.size());
  std::vector<LayerProfile> out(layers.size());
  for (int pass = 0; pass <= kMeasured; ++pass) {
    Tensor x = sample_input;
    for (size_t i = 0; i < layers.size(); ++i) {
      wait_for(x);
      const auto start = std::chrono::steady_clock::now();
      LayerRun run;
      try {
        run = run_layer(*layers[i], x);
      } catch (const Error& e) {
        fail("profile_layers: layer ", i, " (", layers[i]->name(), ") failed on input ", shape_str(x.shape()), " ",
             dtype_name(x.dtype()), ": ", e.what());
      }
      const Tensor y = run.output;
      wait_for(y);
      out[i].stash_bytes = run.stash_bytes;  // the same every pass
      if (pass > 0) {
        samples[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        forwards[i].push_back(run.forward_seconds);
      }
      x = y;
    }
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + kMeasured / 2, v.end());
    return v[kMeasured / 2];
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    out[i].seconds = median(samples[i]);
    out[i].forward_seconds = median(forwards[i]);
  }
  // Profiling is not training: leave no gradients behind.
  for (const auto& layer : layers) layer->zero_grad();
  return out;
}

}  // namespace brigade::pipeline
