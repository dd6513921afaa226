// CUDA graphs: record a stretch of GPU work once, then replay it with a single launch.
//
// A training step on a GPU is hundreds of kernel launches; for small models or short sequences the
// host spends longer issuing them than the GPU spends running them. A graph is recorded once, by
// running the work while the stream *captures* (nothing executes; every launch is written down with
// its arguments), and replayed as one launch afterwards: no per-kernel host cost, no gaps.
//
// What a replay repeats is exactly what was captured — the same kernels on the same addresses with
// the same scalar arguments. Hence the rules:
//   - Memory. Everything the captured work touches must still be there, unchanged in place, at each
//     replay. Tensors it creates live in a pool private to the graph (the caching allocator keeps
//     those blocks for it until the graph is destroyed), so their addresses stay valid; inputs made
//     before the capture must be kept alive by the caller, and new data goes into them in place
//     (copy_), never by making new tensors.
//   - Host values. Nothing on the host runs during a replay: no Python-like control flow, no
//     reading a loss with item(), no learning rate from a schedule. Operations that would be frozen
//     wrongly refuse to be captured with an Error: random numbers (dropout would draw the same mask
//     every replay), the optimizers (their step count and learning rate are kernel arguments —
//     unless AdamW::set_capturable stages them in device memory), anything that waits for the GPU
//     (item(), copies to the CPU).
//   - Warm-up. Lazily created things (cuBLAS handles, optimizer state, cached kernels) must exist
//     before the capture: run the work once eagerly first.
//
// The usual unit is forward + loss + backward (autograd/graphed.h wraps exactly that); the optimizer
// step and anything data-dependent on the host stay eager around it — or, with a capturable AdamW
// (its step's values staged in device memory before each replay), the whole training step is the
// unit (optim/captured_step.h).
//
//   CudaGraph graph;
//   graph.capture(Device::cuda(0), [&] { loss = forward_and_backward(); });  // records, runs nothing
//   for (...) { copy_(input, next_batch); graph.replay(); optimizer.step(); }
//
// A replay runs on a stream the graph owns, ordered after everything already queued on the
// caller's current stream and before anything queued there later — to the caller it behaves like
// the work it replaces. Without CUDA in the build, capture() throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"
#include "core/stream.h"

namespace brigade {

class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();  // frees the graph and gives its memory pool back to the allocator
  CudaGraph(CudaGraph&&) noexcept;
  CudaGraph& operator=(CudaGraph&&) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  // Runs `work` once with a stream of `device` capturing (it becomes the current stream for the
  // call), so that nothing runs and everything is recorded. If `work` throws, or breaks a capture
  // rule, nothing is kept and the Error says why. A graph is captured once.
  void capture(Device device, const std::function<void()>& work);
  // Runs the recorded work again (asynchronously, like any kernel launch).
  void replay() const;

  bool captured() const { return impl_ != nullptr; }
  Device device() const;
  size_t operations() const;  // how many operations (kernels, copies, library calls) were recorded
  size_t pool_bytes() const;  // memory the graph's private pool holds for it

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Whether the calling thread's current stream on `device` is capturing (false without CUDA).
bool is_capturing(Device device);

}  // namespace brigade
