// CudaGraph (core/cuda_graph.h) on the CUDA runtime's stream capture.
#include "core/cuda_graph.h"

#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "core/cuda/capture.h"
#include "core/cuda/check.h"
#include "core/cuda/guard.h"
#include "core/error.h"

namespace brigade {

struct CudaGraph::Impl {
  Device device;
  Stream stream;         // the graph's own: it captures here and replays here
  Event before, after;   // orders each replay with the caller's stream
  cudaGraphExec_t exec = nullptr;
  size_t operations = 0;
  uint64_t pool = 0;

  ~Impl() {
    // A replay still running keeps what it needs: the runtime lets an executable graph be
    // destroyed while launched, and the pool's blocks go back to this stream's own cache, so their
    // next user is queued behind that replay.
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (pool != 0) cuda::release_graph_pool(pool);
  }
};

CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;
CudaGraph::CudaGraph(CudaGraph&&) noexcept = default;
CudaGraph& CudaGraph::operator=(CudaGraph&&) noexcept = default;

namespace {

// Ends a capture that went wrong, dropping whatever it recorded; the error that stopped it is the
// one worth reporting, so this one's own status is cleared.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t partial = nullptr;
  if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) cudaGraphDestroy(partial);
  cudaGetLastError();
}

}  // namespace

void CudaGraph::capture(Device device, const std::function<void()>& work) {
  BRIGADE_CHECK(impl_ == nullptr, "CudaGraph::capture: this graph was already captured (use a new CudaGraph)");
  cuda::check_gpu("CudaGraph::capture", device);
  cuda::DeviceGuard device_guard(device.index);
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  impl->stream = Stream::create(device);
  impl->before = Event::create(device);
  impl->after = Event::create(device);
  cudaStream_t raw = static_cast<cudaStream_t>(impl->stream.raw());

  // The capture starts behind the caller's queued work — ordered in stream order, before the
  // capture begins (a dependency on outside work from within a capture is not allowed).
  impl->before.record(current_stream(device));
  impl->stream.wait(impl->before);

  impl->pool = cuda::begin_graph_pool(device.index, raw);
  cudaGraph_t graph = nullptr;
  {
    StreamGuard stream_guard(impl->stream);
    // Thread-local: other threads (pipeline ranks, data loading) may go on calling CUDA as usual.
    BRIGADE_CUDA_CHECK(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal));
    try {
      work();
    } catch (const std::exception& e) {
      abandon_capture(raw);
      cuda::end_graph_pool(device.index, raw);
      fail("CudaGraph::capture on ", device.str(), ": the captured work failed, nothing was kept: ", e.what());
    }
    const cudaError_t ended = cudaStreamEndCapture(raw, &graph);
    cuda::end_graph_pool(device.index, raw);
    if (ended != cudaSuccess) {
      cudaGetLastError();
      fail("CudaGraph::capture on ", device.str(), ": the capture was invalidated (", cudaGetErrorName(ended), ": ",
           cudaGetErrorString(ended), "); something in the work is not allowed in a graph — see core/cuda_graph.h");
    }
  }
  try {
    size_t count = 0;
    BRIGADE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    impl->operations = count;
    BRIGADE_CUDA_CHECK(cudaGraphInstantiate(&impl->exec, graph, 0));
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
  BRIGADE_CUDA_CHECK(cudaGraphDestroy(graph));  // the executable graph keeps what it needs
  impl_ = std::move(impl);
}

void CudaGraph::replay() const {
  BRIGADE_CHECK(impl_ != nullptr, "CudaGraph::replay: nothing was captured");
  const Impl& g = *impl_;
  cuda::DeviceGuard device_guard(g.device.index);
  const Stream caller = current_stream(g.device);
  const bool other = caller != g.stream;
  if (other) {
    g.before.record(caller);
    g.stream.wait(g.before);
  }
  BRIGADE_CUDA_CHECK(cudaGraphLaunch(g.exec, static_cast<cudaStream_t>(g.stream.raw())));
  if (other) {
    g.after.record(g.stream);
    caller.wait(g.after);
  }
}

Device CudaGraph::device() const {
  BRIGADE_CHECK(impl_ != nullptr, "CudaGraph::device: nothing was captured");
  return impl_->device;
}

size_t CudaGraph::operations() const { return impl_ ? impl_->operations : 0; }
size_t CudaGraph::pool_bytes() const { return impl_ ? cuda::graph_pool_bytes(impl_->pool) : 0; }

bool is_capturing(Device device) {
  if (!device.is_cuda()) return false;
  cuda::check_gpu("is_capturing", device);
  return cuda::is_capturing(static_cast<cudaStream_t>(current_stream(device).raw()));
}

namespace cuda {

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  BRIGADE_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

void refuse_in_capture(const char* op, cudaStream_t stream, const char* why) {
  BRIGADE_CHECK(!is_capturing(stream), op, ": cannot be recorded in a CUDA graph: ", why,
                " (run it outside the captured work)");
}

RelaxedCaptureMode::RelaxedCaptureMode() : previous_(cudaStreamCaptureModeRelaxed) {
  BRIGADE_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_));
}

RelaxedCaptureMode::~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&previous_); }

}  // namespace cuda
}  // namespace brigade
