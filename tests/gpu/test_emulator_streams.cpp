// The CPU emulator's streams, events and race detector (emulator/streams.cpp, events.cpp, races.cpp),
// checked against the CUDA Runtime API's documented behaviour: work on a stream runs after the call
// that queued it returns and in issue order; cudaStreamWaitEvent orders two streams; synchronising
// calls wait; copies involving pageable memory are synchronous where "API synchronization behavior"
// says so. The kernel that makes work observably "still running" spins until the host sets a flag in
// pinned memory, so none of this depends on timing.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/gpu/emulator_kernels.h"

using Catch::Contains;
namespace et = brigade::emu_test;
using et::asynchronous;
using et::last_error;

namespace {

struct Streams {
  cudaStream_t a = nullptr, b = nullptr;
  Streams() {
    REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
  }
  ~Streams() {
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
  }
};

// A pinned flag the host raises, and device ints, freed at scope exit.
struct Memory {
  volatile int* flag = nullptr;
  int* x = nullptr;
  int* y = nullptr;
  Memory() {
    void* f = nullptr;
    REQUIRE(cudaMallocHost(&f, sizeof(int)) == cudaSuccess);
    flag = static_cast<volatile int*>(f);
    *flag = 0;
    REQUIRE(cudaMalloc(&x, 32 * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMalloc(&y, 32 * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMemset(x, 0, 32 * sizeof(int)) == cudaSuccess);
    REQUIRE(cudaMemset(y, 0, 32 * sizeof(int)) == cudaSuccess);
  }
  ~Memory() {
    *flag = 1;  // release anything still waiting
    cudaFree(x);
    cudaFree(y);
    cudaFreeHost(const_cast<int*>(flag));
  }
  int read(const int* p) const {
    int v = -1;
    REQUIRE(cudaMemcpy(&v, p, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
};

}  // namespace

TEST_CASE("emulator streams: a launch returns before its kernel runs, a synchronise waits for it",
          "[gpu][emulator][streams][async]") {
  if (!asynchronous()) return;
  Streams s;
  Memory m;
  et::wait_for_flag(m.flag, m.x, 7, s.a);
  CHECK(last_error() == "");
  CHECK(cudaStreamQuery(s.a) == cudaErrorNotReady);  // the kernel waits for the host
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreate(&done) == cudaSuccess);
  REQUIRE(cudaEventRecord(done, s.a) == cudaSuccess);
  CHECK(cudaEventQuery(done) == cudaErrorNotReady);
  CHECK(cudaStreamQuery(s.b) == cudaSuccess);  // another stream is not held up
  *m.flag = 1;
  REQUIRE(cudaStreamSynchronize(s.a) == cudaSuccess);
  CHECK(cudaEventQuery(done) == cudaSuccess);
  CHECK(m.read(m.x) == 7);
  cudaEventDestroy(done);
}

TEST_CASE("emulator streams: cudaStreamWaitEvent orders another stream's later work",
          "[gpu][emulator][streams][async]") {
  Streams s;
  Memory m;
  cudaEvent_t written = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&written, cudaEventDisableTiming) == cudaSuccess);
  et::wait_for_flag(m.flag, m.x, 5, s.a);  // x = 5, once the host says so
  REQUIRE(cudaEventRecord(written, s.a) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s.b, written, 0) == cudaSuccess);
  et::copy_first(m.x, m.y, s.b);  // y = x, after the event
  CHECK(last_error() == "");      // ordered: no race
  if (asynchronous()) CHECK(cudaStreamQuery(s.b) == cudaErrorNotReady);  // b waits for a
  *m.flag = 1;
  REQUIRE(cudaStreamSynchronize(s.b) == cudaSuccess);
  CHECK(m.read(m.y) == 5);
  cudaEventDestroy(written);
}

TEST_CASE("emulator streams: events time and order as documented", "[gpu][emulator][streams]") {
  Streams s;
  cudaEvent_t never = nullptr, start = nullptr, end = nullptr, untimed = nullptr;
  REQUIRE(cudaEventCreate(&never) == cudaSuccess);
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreate(&end) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming) == cudaSuccess);
  CHECK(cudaEventQuery(never) == cudaSuccess);              // never recorded: complete
  CHECK(cudaStreamWaitEvent(s.a, never, 0) == cudaSuccess);  // and waiting for it is a no-op
  CHECK(cudaStreamSynchronize(s.a) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, never, start) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  REQUIRE(cudaEventRecord(start, s.a) == cudaSuccess);
  REQUIRE(cudaEventRecord(end, s.a) == cudaSuccess);
  REQUIRE(cudaEventRecord(untimed, s.a) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(end) == cudaSuccess);
  REQUIRE(cudaEventElapsedTime(&ms, start, end) == cudaSuccess);
  CHECK(ms >= 0);
  CHECK(cudaEventElapsedTime(&ms, start, untimed) == cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  for (cudaEvent_t e : {never, start, end, untimed}) cudaEventDestroy(e);
}

TEST_CASE("emulator streams: copies with pageable memory are synchronous where the runtime says so",
          "[gpu][emulator][streams][async]") {
  if (!asynchronous()) return;
  Streams s;
  Memory m;
  // Host to device from pageable memory: staged before the call returns, so the caller may reuse
  // its buffer at once, even though the copy itself waits behind the spinning kernel.
  et::wait_for_flag(m.flag, m.y, 1, s.a);
  std::vector<int> source(32, 3);
  REQUIRE(cudaMemcpyAsync(m.x, source.data(), 32 * sizeof(int), cudaMemcpyHostToDevice, s.a) == cudaSuccess);
  source.assign(32, 99);
  CHECK(cudaStreamQuery(s.a) == cudaErrorNotReady);
  // Device to pinned memory: asynchronous — the destination is untouched until the stream gets there.
  int* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)) == cudaSuccess);
  *pinned = -5;
  REQUIRE(cudaMemcpyAsync(pinned, m.x, sizeof(int), cudaMemcpyDeviceToHost, s.a) == cudaSuccess);
  CHECK(*pinned == -5);
  *m.flag = 1;
  // Device to pageable memory: returns only when the copy is done.
  int pageable = -1;
  REQUIRE(cudaMemcpyAsync(&pageable, m.x, sizeof(int), cudaMemcpyDeviceToHost, s.a) == cudaSuccess);
  CHECK(pageable == 3);
  REQUIRE(cudaStreamSynchronize(s.a) == cudaSuccess);
  CHECK(*pinned == 3);
  cudaFreeHost(pinned);
}

TEST_CASE("emulator races: unordered work on two streams is reported, ordered work is not",
          "[gpu][emulator][streams][races]") {
  Streams s;
  Memory m;
  *m.flag = 1;  // nothing waits here: the detector judges order, not timing

  SECTION("a read of another stream's unordered write") {
    et::write_ones_on(m.x, 32, s.a);
    CHECK(last_error() == "");
    et::copy_first(m.x, m.y, s.b);
    const std::string error = last_error();
    CHECK_THAT(error, Contains("race on device 0 allocation"));
    CHECK_THAT(error, Contains("copy_first_kernel<<<(1,1,1), (1,1,1), 0>>> on stream"));
    CHECK_THAT(error, Contains("reads it, but write_kernel<<<(1,1,1), (32,1,1), 0>>> on stream"));
    CHECK_THAT(error, Contains("which writes it, is not ordered before"));
  }
  SECTION("a write over another stream's unordered read") {
    et::copy_first(m.x, m.y, s.a);  // reads x
    CHECK(last_error() == "");
    et::write_ones_on(m.x, 32, s.b);
    CHECK_THAT(last_error(), Contains("which reads it, is not ordered before"));
  }
  SECTION("an asynchronous copy racing a kernel") {
    et::write_ones_on(m.x, 32, s.a);
    int host[32];
    std::vector<int> zeros(32, 0);
    REQUIRE(cudaMemcpyAsync(m.x, zeros.data(), sizeof(host), cudaMemcpyHostToDevice, s.b) == cudaSuccess);
    CHECK_THAT(last_error(), Contains("cudaMemcpyAsync of 128 bytes on stream"));
  }
  SECTION("ordered by an event") {
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    et::write_ones_on(m.x, 32, s.a);
    REQUIRE(cudaEventRecord(e, s.a) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(s.b, e, 0) == cudaSuccess);
    et::copy_first(m.x, m.y, s.b);
    CHECK(last_error() == "");
    cudaEventDestroy(e);
  }
  SECTION("ordered by the host synchronising") {
    et::write_ones_on(m.x, 32, s.a);
    REQUIRE(cudaStreamSynchronize(s.a) == cudaSuccess);
    et::copy_first(m.x, m.y, s.b);
    CHECK(last_error() == "");
  }
  SECTION("an event recorded before the write does not order it") {
    cudaEvent_t e = nullptr;
    REQUIRE(cudaEventCreate(&e) == cudaSuccess);
    REQUIRE(cudaEventRecord(e, s.a) == cudaSuccess);
    et::write_ones_on(m.x, 32, s.a);
    REQUIRE(cudaStreamWaitEvent(s.b, e, 0) == cudaSuccess);
    et::copy_first(m.x, m.y, s.b);
    CHECK_THAT(last_error(), Contains("race on device 0 allocation"));
    cudaEventDestroy(e);
  }
  SECTION("one stream is always ordered") {
    et::write_ones_on(m.x, 32, s.a);
    et::copy_first(m.x, m.y, s.a);
    et::write_ones_on(m.x, 32, s.a);
    CHECK(last_error() == "");
  }
}
