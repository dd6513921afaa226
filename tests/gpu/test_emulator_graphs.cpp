// The CPU emulator's stream capture and graphs (emulator/stream_capture.cpp, graphs.cpp), checked
// against the CUDA documentation: cudaStreamBeginCapture ("all operations pushed into the stream will
// not be executed, but will instead be captured"), cudaThreadExchangeStreamCaptureMode (which calls a
// capture forbids, per mode and thread), cudaStreamIsCapturing (the legacy stream while a blocking
// stream captures), cudaGraphLaunch (each launch behind the previous one), the error codes'
// descriptions in driver_types.h, and the Programming Guide's "Prohibited and Unhandled Operations"
// (no waiting for a capturing stream or a captured event; a broken rule invalidates the capture).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/emulator_fixture.h"
#include "tests/gpu/emulator_kernels.h"

using Catch::Contains;
namespace et = brigade::emu_test;
using et::asynchronous;
using et::last_error;

namespace {

// The flag starts raised: a captured wait_for_flag then runs through at once unless a test lowers it.
struct Fixture : et::Fixture {
  Fixture() : et::Fixture(1) {}
};

size_t node_count(cudaGraph_t g) {
  size_t n = 0;
  REQUIRE(cudaGraphGetNodes(g, nullptr, &n) == cudaSuccess);
  return n;
}

}  // namespace

TEST_CASE("emulator graphs: a capture runs nothing; each launch runs it all again, with the captured arguments",
          "[gpu][emulator][graphs]") {
  Fixture f;
  REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(f.a, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  REQUIRE(cudaStreamIsCapturing(f.b, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusNone);
  et::write_ones_on(f.x, 32, f.a);                                                              // x = 1
  et::copy_first(f.x, f.y, f.a);                                                                // y[0] = x[0]
  REQUIRE(cudaMemsetAsync(f.x, 0, sizeof(int), f.a) == cudaSuccess);                            // x[0] = 0
  REQUIRE(cudaMemcpyAsync(f.y + 1, f.x, sizeof(int), cudaMemcpyDeviceToDevice, f.a) == cudaSuccess);  // y[1] = x[0]
  CHECK(last_error() == "");
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(f.a, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  CHECK(node_count(graph) == 4);
  REQUIRE(cudaStreamSynchronize(f.a) == cudaSuccess);
  CHECK(f.read(f.x + 5) == 0);  // nothing ran
  CHECK(f.read(f.y) == 0);

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);  // the executable graph does not need it
  for (int replay = 0; replay < 2; ++replay) {
    f.zero();
    REQUIRE(cudaGraphLaunch(exec, f.b) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(f.b) == cudaSuccess);
    CHECK(f.read(f.x + 5) == 1);  // the same addresses every time
    CHECK(f.read(f.x) == 0);
    CHECK(f.read(f.y) == 1);      // in capture order: the copy saw the kernel's write...
    CHECK(f.read(f.y + 1) == 0);  // ...and the second copy the memset's
  }
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
}

TEST_CASE("emulator graphs: a launch waits for the previous launch of the same graph on another stream",
          "[gpu][emulator][graphs][async]") {
  if (!asynchronous()) return;
  Fixture f;
  REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
  et::wait_for_flag(f.flag, f.x, 3, f.a);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(f.a, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  *f.flag = 0;  // the first launch spins until the host says so
  REQUIRE(cudaGraphLaunch(exec, f.a) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, f.b) == cudaSuccess);
  CHECK(last_error() == "");  // ordered behind the first launch: no race on x
  CHECK(cudaStreamQuery(f.b) == cudaErrorNotReady);
  *f.flag = 1;
  REQUIRE(cudaStreamSynchronize(f.b) == cudaSuccess);
  CHECK(cudaStreamQuery(f.a) == cudaSuccess);
  CHECK(f.read(f.x) == 3);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_CASE("emulator graphs: the race detector sees a launch as everything its nodes touch",
          "[gpu][emulator][graphs][races]") {
  Fixture f;
  REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
  et::copy_first(f.x, f.y, f.a);  // reads x
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(f.a, &graph) == cudaSuccess);
  CHECK(last_error() == "");  // recording is not running: nothing to race with yet
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  et::write_ones_on(f.x, 32, f.b);
  REQUIRE(cudaGraphLaunch(exec, f.a) == cudaSuccess);
  CHECK_THAT(last_error(), Contains("cudaGraphLaunch (1 nodes) on stream"));
  REQUIRE(cudaStreamSynchronize(f.b) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, f.a) == cudaSuccess);  // the host saw b finish: ordered now
  CHECK(last_error() == "");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_CASE("emulator graphs: waiting for a capturing stream, or its events, breaks the capture",
          "[gpu][emulator][graphs]") {
  Fixture f;
  REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
  et::write_ones_on(f.x, 32, f.a);
  SECTION("cudaStreamSynchronize") {
    CHECK(cudaStreamSynchronize(f.a) == cudaErrorStreamCaptureUnsupported);
  }
  SECTION("cudaStreamQuery") {
    CHECK(cudaStreamQuery(f.a) == cudaErrorStreamCaptureUnsupported);
  }
  SECTION("cudaDeviceSynchronize") {
    CHECK(cudaDeviceSynchronize() == cudaErrorStreamCaptureUnsupported);
  }
  SECTION("a copy to pageable memory, which waits for itself") {
    int host = 0;
    CHECK(cudaMemcpyAsync(&host, f.x, sizeof(int), cudaMemcpyDeviceToHost, f.a) == cudaErrorStreamCaptureUnsupported);
  }
  SECTION("an event recorded in the capture, queried") {
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    REQUIRE(cudaEventRecord(e, f.a) == cudaSuccess);
    CHECK(cudaEventQuery(e) == cudaErrorCapturedEvent);
    cudaEventDestroy(e);
  }
  SECTION("an event from outside, waited for inside") {
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    REQUIRE(cudaEventRecord(e, f.b) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(f.a, e, 0) == cudaErrorStreamCaptureIsolation);
    cudaEventDestroy(e);
  }
  SECTION("another stream joining through an event (a fork: allowed by CUDA, not modelled here)") {
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    REQUIRE(cudaEventRecord(e, f.a) == cudaSuccess);
    CHECK(cudaStreamWaitEvent(f.b, e, 0) == cudaErrorStreamCaptureUnsupported);
    CHECK_THAT(last_error(), Contains("not modelled"));
    cudaEventDestroy(e);
  }
  cudaGetLastError();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(f.a, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusInvalidated);
  et::copy_first(f.x, f.y, f.a);  // more work for an invalidated capture fails
  CHECK_THAT(last_error(), Contains("cudaErrorStreamCaptureInvalidated"));
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&f);  // overwritten with nullptr
  CHECK(cudaStreamEndCapture(f.a, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(graph == nullptr);
  cudaGetLastError();
  // The stream works normally again, and the recorded kernel never ran.
  REQUIRE(cudaStreamSynchronize(f.a) == cudaSuccess);
  CHECK(f.read(f.x + 3) == 0);
}

TEST_CASE("emulator graphs: cudaMalloc during a capture follows cudaThreadExchangeStreamCaptureMode",
          "[gpu][emulator][graphs]") {
  Fixture f;
  void* p = nullptr;
  SECTION("this thread's global capture bars it; relaxed mode allows it and keeps the capture valid") {
    REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
    CHECK(mode == cudaStreamCaptureModeGlobal);  // the default, handed back
    CHECK(cudaMalloc(&p, 64) == cudaSuccess);
    REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);  // back to global
    CHECK(mode == cudaStreamCaptureModeRelaxed);
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(f.a, &graph) == cudaSuccess);
    cudaGraphDestroy(graph);
    CHECK(cudaFree(p) == cudaSuccess);
    // Without the exchange: refused, and the capture is over.
    REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(f.a, &graph) == cudaErrorStreamCaptureInvalidated);
  }
  SECTION("a relaxed capture bars nothing") {
    REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeRelaxed) == cudaSuccess);
    CHECK(cudaMalloc(&p, 64) == cudaSuccess);
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(f.a, &graph) == cudaSuccess);
    cudaGraphDestroy(graph);
    CHECK(cudaFree(p) == cudaSuccess);
  }
  SECTION("another thread's capture bars this thread only when both are global") {
    for (cudaStreamCaptureMode theirs : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
      std::thread([&] { REQUIRE(cudaStreamBeginCapture(f.a, theirs) == cudaSuccess); }).join();
      const cudaError_t got = cudaMalloc(&p, 64);
      if (theirs == cudaStreamCaptureModeGlobal) {
        CHECK(got == cudaErrorStreamCaptureUnsupported);
      } else {
        CHECK(got == cudaSuccess);
        CHECK(cudaFree(p) == cudaErrorStreamCaptureUnsupported);  // cudaFree waits for the device
      }
      cudaGetLastError();
      cudaGraph_t graph = nullptr;
      // Not relaxed: only the thread that began the capture may end it.
      CHECK(cudaStreamEndCapture(f.a, &graph) == cudaErrorStreamCaptureWrongThread);
      std::thread([&] { cudaStreamEndCapture(f.a, &graph); }).join();
      if (graph) cudaGraphDestroy(graph);
      if (got == cudaSuccess) CHECK(cudaFree(p) == cudaSuccess);
      cudaGetLastError();
    }
  }
  cudaGetLastError();
}

TEST_CASE("emulator graphs: what may not capture, and the legacy stream beside a capturing blocking stream",
          "[gpu][emulator][graphs]") {
  Fixture f;
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) == cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(f.a, &graph) == cudaErrorStreamCaptureUnmatched);  // never began
  REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeGlobal) == cudaErrorInvalidValue);  // already
  // Pageable host memory would be read at capture time, not at each replay.
  std::vector<int> host(32, 4);
  CHECK(cudaMemcpyAsync(f.x, host.data(), 128, cudaMemcpyHostToDevice, f.a) == cudaErrorStreamCaptureUnsupported);
  cudaGetLastError();
  CHECK(cudaStreamEndCapture(f.a, &graph) == cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();

  cudaStream_t blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  cudaStreamCaptureStatus status;
  CHECK(cudaStreamIsCapturing(nullptr, &status) == cudaErrorStreamCaptureImplicit);
  cudaGetLastError();
  // "The blocking stream capture is not invalidated" (cudaStreamIsCapturing's documentation).
  CHECK(cudaStreamIsCapturing(blocking, &status) == cudaSuccess);
  CHECK(status == cudaStreamCaptureStatusActive);
  et::write_ones(f.x, 32);  // a launch on the legacy stream: this one does invalidate it
  CHECK_THAT(last_error(), Contains("cudaErrorStreamCaptureImplicit"));
  CHECK(cudaStreamEndCapture(blocking, &graph) == cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaStreamDestroy(blocking);
  // A non-blocking stream's capture leaves the legacy stream alone.
  REQUIRE(cudaStreamBeginCapture(f.a, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  et::write_ones(f.x, 32);
  CHECK(last_error() == "");
  CHECK(cudaStreamEndCapture(f.a, &graph) == cudaSuccess);
  cudaGraphDestroy(graph);
  CHECK(f.read(f.x + 31) == 1);
}
