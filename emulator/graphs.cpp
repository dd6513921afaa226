// The CUDA emulator's graphs: stream capture's API, and launching what it captured.
//
// stream_capture.cpp records the work a capturing stream is given (streams.h, "stream capture"); this file
// turns the recording into the runtime's objects:
//   cudaStreamBeginCapture .. cudaStreamEndCapture  -> a cudaGraph_t (the list of captured nodes)
//   cudaGraphInstantiate                            -> a cudaGraphExec_t (the same list, frozen)
//   cudaGraphLaunch(exec, stream)                   -> one piece of work on `stream` that runs every
//                                                      node in capture order
// A captured graph is a chain: one stream was captured, so each node depends on the one before, and
// running them in order is exactly the dependency order a GPU would respect. Every node keeps the
// arguments it was captured with (a kernel's parameters, a copy's addresses): replaying re-reads
// and re-writes the same memory, which is why the memory a graph uses must stay reserved for it
// (the caching allocator's graph pools, core/cuda/caching_allocator.h).
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "emulator/runtime.h"
#include "emulator/streams.h"

namespace brigade::emu {
namespace {

struct EmulatedGraph {
  int device = 0;
  std::shared_ptr<const GraphNodes> nodes;
};

struct EmulatedGraphExec {
  int device = 0;
  std::shared_ptr<const GraphNodes> nodes;
  std::vector<Access> accesses;  // every node's, once per (allocation, write)
  // "Each launch is ordered behind ... any previous launches of graphExec" (cudaGraphLaunch).
  std::mutex mutex;
  cudaStream_t last_stream = nullptr;
  cudaEvent_t last_launch = nullptr;
  bool launched = false;
};

cudaError_t invalid(const std::string& text) { return report_error(cudaErrorInvalidValue, "CUDA emulator: " + text); }

// What the race detector is told a launch touches: the union of its nodes' accesses.
std::vector<Access> union_of(const GraphNodes& nodes) {
  std::set<std::pair<const void*, bool>> seen;
  std::vector<Access> out;
  for (const GraphNode& node : nodes)
    for (const Access& a : node.accesses)
      if (seen.insert({a.pointer, a.write}).second) out.push_back(a);
  return out;
}

}  // namespace
}  // namespace brigade::emu

using namespace brigade::emu;

// ---- capture --------------------------------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  return begin_capture(stream, mode);
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!graph) return invalid("cudaStreamEndCapture: pGraph is null");
  *graph = nullptr;
  std::shared_ptr<const GraphNodes> nodes;
  if (const cudaError_t e = end_capture(stream, &nodes); e != cudaSuccess) return e;
  auto* g = new EmulatedGraph;
  g->device = stream_device(stream);
  g->nodes = std::move(nodes);
  *graph = reinterpret_cast<cudaGraph_t>(g);
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return invalid("cudaStreamIsCapturing: pCaptureStatus is null");
  // Asking about the legacy stream while a blocking stream captures is an error, but (unlike any
  // other use of the legacy stream then) it leaves the capture valid, as the documentation says.
  if (stream == nullptr) {
    if (const cudaError_t e = check_legacy_query(stream, "cudaStreamIsCapturing"); e != cudaSuccess) return e;
  }
  *status = capture_status(stream, nullptr);
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode) return invalid("cudaThreadExchangeStreamCaptureMode: mode is null");
  if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
      *mode != cudaStreamCaptureModeRelaxed)
    return invalid("cudaThreadExchangeStreamCaptureMode: unknown mode " + std::to_string(int(*mode)));
  *mode = exchange_capture_mode(*mode);
  return cudaSuccess;
}

// ---- graphs ---------------------------------------------------------------------------------------------

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!graph || !count) return invalid("cudaGraphGetNodes: a null graph or count");
  const auto* g = reinterpret_cast<const EmulatedGraph*>(graph);
  const size_t have = g->nodes->size();
  if (nodes) {
    // Handles name nodes; the emulator has no per-node API, so they are opaque positions (1-based).
    for (size_t i = 0; i < std::min(have, *count); ++i) nodes[i] = reinterpret_cast<cudaGraphNode_t>(i + 1);
    if (*count > have)
      for (size_t i = have; i < *count; ++i) nodes[i] = nullptr;
  }
  *count = have;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  if (!exec || !graph) return invalid("cudaGraphInstantiate: a null graph or pGraphExec");
  if (flags != 0)
    return invalid("cudaGraphInstantiate: flags " + std::to_string(flags) +
                   ": the emulator models none (auto-free, upload, device launch, priority)");
  const auto* g = reinterpret_cast<const EmulatedGraph*>(graph);
  auto* x = new EmulatedGraphExec;
  x->device = g->device;
  x->nodes = g->nodes;  // immutable: the graph may be destroyed or changed without affecting this
  x->accesses = union_of(*g->nodes);
  *exec = reinterpret_cast<cudaGraphExec_t>(x);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return invalid("cudaGraphUpload: a null graph");
  if (stream_device(stream) != reinterpret_cast<const EmulatedGraphExec*>(exec)->device)
    return invalid("cudaGraphUpload: the stream belongs to another device than the graph");
  return cudaSuccess;  // nothing to upload: the nodes already live where they run
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return invalid("cudaGraphLaunch: a null graph");
  auto* x = reinterpret_cast<EmulatedGraphExec*>(exec);
  if (stream_device(stream) != x->device)
    return invalid("cudaGraphLaunch: a graph of device " + std::to_string(x->device) + " launched on a stream of device " +
                   std::to_string(stream_device(stream)));
  const bool capturing = capture_status(stream, nullptr) != cudaStreamCaptureStatusNone;
  std::lock_guard<std::mutex> lock(x->mutex);
  // Behind the previous launch when that went to another stream (on the same stream, stream order
  // does it). A launch inside a capture becomes a node of that graph and is ordered there.
  if (x->launched && !capturing && x->last_stream != stream) {
    if (const cudaError_t e = cudaStreamWaitEvent(stream, x->last_launch, 0); e != cudaSuccess) return e;
  }
  const std::shared_ptr<const GraphNodes> nodes = x->nodes;
  const std::string what = "cudaGraphLaunch (" + std::to_string(nodes->size()) + " nodes)";
  const cudaError_t e = enqueue(stream, what, x->accesses, [nodes]() -> std::string {
    for (size_t i = 0; i < nodes->size(); ++i) {
      const std::string error = (*nodes)[i].work();
      if (!error.empty()) return "node " + std::to_string(i) + " (" + (*nodes)[i].what + "): " + error;
    }
    return "";
  });
  if (e != cudaSuccess || capturing) return e;
  if (!x->last_launch) {
    if (const cudaError_t c = cudaEventCreateWithFlags(&x->last_launch, cudaEventDisableTiming); c != cudaSuccess)
      return c;
  }
  if (const cudaError_t r = cudaEventRecord(x->last_launch, stream); r != cudaSuccess) return r;
  x->last_stream = stream;
  x->launched = true;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (!exec) return invalid("cudaGraphExecDestroy: a null graph");
  auto* x = reinterpret_cast<EmulatedGraphExec*>(exec);
  // Launches already queued keep their nodes (shared); the event's mark lives on in its item.
  if (x->last_launch) cudaEventDestroy(x->last_launch);
  delete x;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return invalid("cudaGraphDestroy: a null graph");
  delete reinterpret_cast<EmulatedGraph*>(graph);
  return cudaSuccess;
}
