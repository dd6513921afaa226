// The CUDA emulator's NCCL (emulator/nccl_*.cpp): ranks as threads of this process and as
// forked processes, every expected value worked out by hand. Then brigade's own nccl backend
// (comm/nccl.cpp) on top of it: nccl_group over two emulated GPUs and nccl_communicator across
// processes through a file store.
//
// Every case runs under an alarm: a hang kills the test binary (a failure), it never blocks CI.
// Catch2's assertions are not thread-safe, so rank threads report through strings and forked ranks
// through their exit codes.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "brigade.h"
#include "comm/comm.h"
#include "comm/nccl.h"
#include "emulator/runtime.h"

using Catch::Contains;
using namespace std::chrono_literals;

namespace {

// Two emulated GPUs unless the environment says otherwise (read once, at the first CUDA call).
[[maybe_unused]] const bool two_gpus = (setenv("BRIGADE_EMULATED_GPUS", "2", 0), true);

// Kills the whole test binary if a case runs past `seconds` (SIGALRM's default action).
struct TimeLimit {
  explicit TimeLimit(unsigned seconds) { alarm(seconds); }
  ~TimeLimit() { alarm(0); }
};

int gpus() {
  int n = 0;
  cudaGetDeviceCount(&n);
  return n;
}

// Device memory of the current device holding `values`.
template <class T>
T* to_device(const std::vector<T>& values) {
  void* p = nullptr;
  if (cudaMalloc(&p, std::max<size_t>(1, values.size()) * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const T* p, size_t n) {
  std::vector<T> out(n);
  cudaMemcpy(out.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return out;
}

uint16_t bf16(float f) {  // exact for the small integers and halves used here
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t(bits >> 16);
}

std::string check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return "";
  return std::string(what) + " returned " + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
}
#define TRY(expr)                                      \
  do {                                                 \
    std::string problem_ = check((expr), #expr);       \
    if (!problem_.empty()) throw std::runtime_error(problem_); \
  } while (0)

// A rank of a test: its communicator, device and own stream.
struct Member {
  ncclComm_t comm = nullptr;
  int device = 0;
  cudaStream_t stream = nullptr;
};

// Runs body(rank) on one thread per rank; returns what each threw ("" when fine).
std::vector<std::string> on_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

bool all_ok(const std::vector<std::string>& errors) {
  bool ok = true;
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) {
      UNSCOPED_INFO("rank " << r << ": " << errors[r]);
      ok = false;
    }
  return ok;
}

// n ranks, rank r on device r, each initialised (blocking) on its own thread. (The header's NCCL,
// older than 2.30.3, allows one rank of a communicator per GPU.)
std::vector<Member> make_members(int n) {
  REQUIRE(n <= gpus());
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<Member> members(static_cast<size_t>(n));
  REQUIRE(all_ok(on_threads(n, [&](int r) {
    Member& m = members[size_t(r)];
    m.device = r;
    cudaSetDevice(m.device);
    TRY(ncclCommInitRank(&m.comm, n, id, r));
    if (cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking) != cudaSuccess) throw std::runtime_error("cudaStreamCreate");
  })));
  return members;
}

void destroy(std::vector<Member>& members) {
  for (Member& m : members) {
    if (m.comm) CHECK(ncclCommDestroy(m.comm) == ncclSuccess);
    cudaSetDevice(m.device);
    if (m.stream) cudaStreamDestroy(m.stream);
  }
  cudaSetDevice(0);
}

void sync(const Member& m) {
  cudaSetDevice(m.device);
  const cudaError_t e = cudaStreamSynchronize(m.stream);
  if (e != cudaSuccess) throw std::runtime_error(std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
}

// Polls `comm` until its asynchronous state is not ncclInProgress/ncclSuccess-while-waiting.
ncclResult_t wait_for_async_error(ncclComm_t comm, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  ncclResult_t state = ncclSuccess;
  while (std::chrono::steady_clock::now() < end) {
    ncclCommGetAsyncError(comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) return state;
    std::this_thread::sleep_for(2ms);
  }
  return state;
}

// Connects both directions between this rank and `peer` with one mirrored group (each sends the
// other a number, through `scratch`: two floats of the rank's device), so that later calls find their
// links set up (nccl_connect.cpp). Both call it. (It frees nothing: the emulator's cudaFree waits
// for every device, including a peer's stream that may already wait for this rank.)
void connect_both_ways(const Member& m, int peer, float* scratch) {
  cudaSetDevice(m.device);
  TRY(ncclGroupStart());
  TRY(ncclSend(scratch, 1, ncclFloat32, peer, m.comm, m.stream));
  TRY(ncclRecv(scratch + 1, 1, ncclFloat32, peer, m.comm, m.stream));
  TRY(ncclGroupEnd());
  sync(m);
}

}  // namespace

// ---- ranks as threads --------------------------------------------------------------------------------

TEST_CASE("emulated nccl: version, unique ids, queries", "[emulated_nccl]") {
  TimeLimit limit(60);
  int version = 0;
  REQUIRE(ncclGetVersion(&version) == ncclSuccess);
  REQUIRE(version == NCCL_VERSION_CODE);
  ncclUniqueId a, b;
  REQUIRE(ncclGetUniqueId(&a) == ncclSuccess);
  REQUIRE(ncclGetUniqueId(&b) == ncclSuccess);
  REQUIRE(std::memcmp(&a, &b, sizeof a) != 0);
  auto members = make_members(3);
  for (int r = 0; r < 3; ++r) {
    int count = 0, rank = -1, device = -1;
    REQUIRE(ncclCommCount(members[size_t(r)].comm, &count) == ncclSuccess);
    REQUIRE(ncclCommUserRank(members[size_t(r)].comm, &rank) == ncclSuccess);
    REQUIRE(ncclCommCuDevice(members[size_t(r)].comm, &device) == ncclSuccess);
    CHECK(count == 3);
    CHECK(rank == r);
    CHECK(device == r % gpus());
  }
  // Argument errors come back at once, with a text.
  float* x = to_device(std::vector<float>(4, 1.0f));
  CHECK(ncclSend(x, 4, ncclFloat32, 3, members[0].comm, members[0].stream) == ncclInvalidArgument);
  CHECK_THAT(ncclGetLastError(nullptr), Contains("peer 3 is not a rank of 3"));
  CHECK(ncclSend(x, 4, ncclFloat8e4m3, 1, members[0].comm, members[0].stream) == ncclInvalidArgument);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  cudaFree(x);
  destroy(members);
}

TEST_CASE("emulated nccl: a ring of sends and receives, grouped and in order", "[emulated_nccl]") {
  TimeLimit limit(60);
  const int n = 3;
  auto members = make_members(n);
  std::vector<std::vector<float>> got(n);
  REQUIRE(all_ok(on_threads(n, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    float* out = to_device(std::vector<float>{float(r), float(10 * r), float(100 * r)});
    float* in = to_device(std::vector<float>(3, -1.0f));
    TRY(ncclGroupStart());
    TRY(ncclSend(out, 3, ncclFloat32, next, m.comm, m.stream));
    TRY(ncclRecv(in, 3, ncclFloat32, prev, m.comm, m.stream));
    TRY(ncclGroupEnd());
    sync(m);
    got[size_t(r)] = to_host(in, 3);
    cudaFree(out);
    cudaFree(in);
  })));
  for (int r = 0; r < n; ++r) {
    const float p = float((r + n - 1) % n);
    CHECK(got[size_t(r)] == std::vector<float>{p, 10 * p, 100 * p});
  }
  // Without a group: even ranks send first, odd ranks receive first (2 ranks), and two messages
  // between the same pair arrive in the order they were sent (no tags).
  auto pair = make_members(2);
  std::vector<std::vector<int64_t>> received(2);
  REQUIRE(all_ok(on_threads(2, [&](int r) {
    Member& m = pair[size_t(r)];
    cudaSetDevice(m.device);
    int64_t* first = to_device(std::vector<int64_t>{r * 10 + 1, r * 10 + 2});
    int64_t* second = to_device(std::vector<int64_t>{r * 10 + 3, r * 10 + 4});
    int64_t* a = to_device(std::vector<int64_t>(2, 0));
    int64_t* b = to_device(std::vector<int64_t>(2, 0));
    const int peer = 1 - r;
    if (r == 0) {
      TRY(ncclSend(first, 2, ncclInt64, peer, m.comm, m.stream));
      TRY(ncclSend(second, 2, ncclInt64, peer, m.comm, m.stream));
      TRY(ncclRecv(a, 2, ncclInt64, peer, m.comm, m.stream));
      TRY(ncclRecv(b, 2, ncclInt64, peer, m.comm, m.stream));
    } else {
      TRY(ncclRecv(a, 2, ncclInt64, peer, m.comm, m.stream));
      TRY(ncclRecv(b, 2, ncclInt64, peer, m.comm, m.stream));
      TRY(ncclSend(first, 2, ncclInt64, peer, m.comm, m.stream));
      TRY(ncclSend(second, 2, ncclInt64, peer, m.comm, m.stream));
    }
    sync(m);
    auto x = to_host(a, 2), y = to_host(b, 2);
    received[size_t(r)] = {x[0], x[1], y[0], y[1]};
    for (void* p : {(void*)first, (void*)second, (void*)a, (void*)b}) cudaFree(p);
  })));
  CHECK(received[1] == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(received[0] == std::vector<int64_t>{11, 12, 13, 14});
  destroy(pair);
  destroy(members);
}

TEST_CASE("emulated nccl: a send to self needs its receive in the same group, and the converse",
          "[emulated_nccl]") {
  // NCCL's p2p scheduling (enqueue.cc) pairs a rank's sends to itself with its receives from itself
  // within a group and refuses a leftover with ncclInvalidUsage ("Trying to send to self without a
  // matching recv"); a GPU would otherwise wait forever.
  TimeLimit limit(60);
  std::vector<Member> members = make_members(1);
  Member& m = members[0];
  float* x = to_device(std::vector<float>{1, 2, 3, 4});
  float* y = to_device(std::vector<float>(4, 0.0f));
  CHECK(ncclSend(x, 4, ncclFloat32, 0, m.comm, m.stream) == ncclInvalidUsage);
  CHECK_THAT(ncclGetLastError(nullptr), Contains("trying to send to self without a matching recv"));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclRecv(y, 4, ncclFloat32, 0, m.comm, m.stream) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  CHECK_THAT(ncclGetLastError(nullptr), Contains("trying to recv from self without a matching send"));
  // Two sends, one receive: one is left over.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(x, 4, ncclFloat32, 0, m.comm, m.stream) == ncclSuccess);
  REQUIRE(ncclSend(x, 4, ncclFloat32, 0, m.comm, m.stream) == ncclSuccess);
  REQUIRE(ncclRecv(y, 4, ncclFloat32, 0, m.comm, m.stream) == ncclSuccess);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);
  // Paired, it runs.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(x, 4, ncclFloat32, 0, m.comm, m.stream) == ncclSuccess);
  REQUIRE(ncclRecv(y, 4, ncclFloat32, 0, m.comm, m.stream) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  sync(m);
  CHECK(to_host(y, 4) == std::vector<float>{1, 2, 3, 4});
  cudaFree(x);
  cudaFree(y);
  destroy(members);
}

TEST_CASE("emulated nccl: operations are ordered on their stream, both ways", "[emulated_nccl]") {
  TimeLimit limit(60);
  auto members = make_members(2);
  std::vector<std::vector<uint8_t>> got(2);
  REQUIRE(all_ok(on_threads(2, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    uint8_t* x = to_device(std::vector<uint8_t>(64, 0));
    uint8_t* y = to_device(std::vector<uint8_t>(64, 0));
    void* pinned = nullptr;
    cudaMallocHost(&pinned, 64);
    // Nothing waits on the host in between: the send must see the memset queued before it, and
    // the copy queued after the receive must see what arrived.
    cudaMemsetAsync(x, 10 + r, 64, m.stream);
    TRY(ncclGroupStart());
    TRY(ncclSend(x, 64, ncclUint8, 1 - r, m.comm, m.stream));
    TRY(ncclRecv(y, 64, ncclUint8, 1 - r, m.comm, m.stream));
    TRY(ncclGroupEnd());
    cudaMemcpyAsync(pinned, y, 64, cudaMemcpyDeviceToHost, m.stream);
    sync(m);
    const uint8_t* bytes = static_cast<const uint8_t*>(pinned);
    got[size_t(r)].assign(bytes, bytes + 64);
    cudaFreeHost(pinned);
    cudaFree(x);
    cudaFree(y);
  })));
  CHECK(got[0] == std::vector<uint8_t>(64, 11));
  CHECK(got[1] == std::vector<uint8_t>(64, 10));
  destroy(members);
}

TEST_CASE("emulated nccl: a grouped exchange that would deadlock without its group", "[emulated_nccl]") {
  TimeLimit limit(60);
  auto members = make_members(2);
  std::vector<std::vector<double>> got(2);
  REQUIRE(all_ok(on_threads(2, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    // Both ranks send first: fine only because both calls progress together.
    double* out = to_device(std::vector<double>{r + 0.25, r + 0.5});
    double* in = to_device(std::vector<double>(2, 0.0));
    TRY(ncclGroupStart());
    TRY(ncclSend(out, 2, ncclFloat64, 1 - r, m.comm, m.stream));
    TRY(ncclRecv(in, 2, ncclFloat64, 1 - r, m.comm, m.stream));
    TRY(ncclGroupEnd());
    sync(m);
    got[size_t(r)] = to_host(in, 2);
    cudaFree(out);
    cudaFree(in);
  })));
  CHECK(got[0] == std::vector<double>{1.25, 1.5});
  CHECK(got[1] == std::vector<double>{0.25, 0.5});
  destroy(members);
}

TEST_CASE("emulated nccl: all-reduce sum and avg, f32 and bf16, the same bits everywhere", "[emulated_nccl]") {
  TimeLimit limit(60);
  const int n = 3;
  auto members = make_members(n);
  // f32 values whose sum depends on the order: in rank order (1e8 + -1e8) + 1 = 1, while the
  // reverse order gives (1 + -1e8) + 1e8 = 0 (1 - 1e8 rounds to -1e8 in f32). The last column's
  // average depends on how it is taken: NCCL's ncclAvg multiplies each value by float(1/3) and
  // then sums (enqueue.cc), which differs here from summing and then dividing.
  const std::vector<std::vector<float>> inputs = {
      {1e8f, 1.0f, 0.5f, 1.1f}, {-1e8f, 2.0f, 0.25f, 6.1f}, {1.0f, 3.0f, 0.25f, 3.0f}};
  std::vector<std::vector<float>> sums(n), avgs(n);
  std::vector<std::vector<uint16_t>> bf_sums(n), bf_avgs(n);
  REQUIRE(all_ok(on_threads(n, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    float* x = to_device(inputs[size_t(r)]);
    float* y = to_device(std::vector<float>(4, 0.0f));
    TRY(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, m.comm, m.stream));
    TRY(ncclAllReduce(x, x, 4, ncclFloat32, ncclAvg, m.comm, m.stream));  // in place
    uint16_t* b = to_device(std::vector<uint16_t>{bf16(float(r + 1)), bf16(0.5f * float(r)), bf16(-2.0f)});
    uint16_t* c = to_device(std::vector<uint16_t>(3, 0));
    TRY(ncclAllReduce(b, c, 3, ncclBfloat16, ncclSum, m.comm, m.stream));
    TRY(ncclAllReduce(b, b, 3, ncclBfloat16, ncclAvg, m.comm, m.stream));
    sync(m);
    sums[size_t(r)] = to_host(y, 4);
    avgs[size_t(r)] = to_host(x, 4);
    bf_sums[size_t(r)] = to_host(c, 3);
    bf_avgs[size_t(r)] = to_host(b, 3);
    for (void* p : {(void*)x, (void*)y, (void*)b, (void*)c}) cudaFree(p);
  })));
  // The last column in f32, in rank order: the sum, NCCL's average, and the sum divided by 3.
  volatile float third = float(1.0 / 3.0), a = 1.1f, b = 6.1f, c = 3.0f;  // volatile: no contraction
  const float sum3 = (a + b) + c, premultiplied = (a * third + b * third) + c * third, divided = sum3 / 3.0f;
  REQUIRE(premultiplied != divided);  // the column tells the two apart
  const std::vector<float> sum = {1.0f, 6.0f, 1.0f, sum3};
  const std::vector<float> avg = {1.0f / 3.0f, 2.0f, 1.0f / 3.0f, premultiplied};
  for (int r = 0; r < n; ++r) {
    CHECK(std::memcmp(sums[size_t(r)].data(), sum.data(), sizeof(float) * 4) == 0);
    CHECK(std::memcmp(avgs[size_t(r)].data(), avg.data(), sizeof(float) * 4) == 0);
    // bf16: 1 + 2 + 3 = 6; 0 + 0.5 + 1 = 1.5; -6; averages (each value times bf16(1/3), summed)
    // round to 2, 0.5, -2.
    CHECK(bf_sums[size_t(r)] == std::vector<uint16_t>{bf16(6.0f), bf16(1.5f), bf16(-6.0f)});
    CHECK(bf_avgs[size_t(r)] == std::vector<uint16_t>{bf16(2.0f), bf16(0.5f), bf16(-2.0f)});
  }
  destroy(members);
}

TEST_CASE("emulated nccl: broadcast, reduce, all-gather, reduce-scatter, prod/max/min", "[emulated_nccl]") {
  TimeLimit limit(60);
  const int n = 3;
  auto members = make_members(n);
  std::vector<std::vector<int32_t>> bcast(n), gathered(n), scattered(n), reduced(n), prod(n), mx(n), mn(n);
  REQUIRE(all_ok(on_threads(n, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    int32_t* b = to_device(std::vector<int32_t>{r == 1 ? 7 : 0, r == 1 ? 8 : 0});
    TRY(ncclBroadcast(b, b, 2, ncclInt32, 1, m.comm, m.stream));
    int32_t* mine = to_device(std::vector<int32_t>{r, 10 + r});
    int32_t* all = to_device(std::vector<int32_t>(2 * n, -1));
    TRY(ncclAllGather(mine, all, 2, ncclInt32, m.comm, m.stream));
    // Rank r contributes (r+1) * [1, 2, 3, 4, 5, 6]; rank q keeps elements 2q, 2q+1 of the sum (x6).
    std::vector<int32_t> rows;
    for (int i = 1; i <= 2 * n; ++i) rows.push_back((r + 1) * i);
    int32_t* rs_in = to_device(rows);
    int32_t* rs_out = to_device(std::vector<int32_t>(2, 0));
    TRY(ncclReduceScatter(rs_in, rs_out, 2, ncclInt32, ncclSum, m.comm, m.stream));
    int32_t* red = to_device(std::vector<int32_t>{r + 1, -1});
    int32_t* red_out = to_device(std::vector<int32_t>{-5, -5});
    TRY(ncclReduce(red, red_out, 2, ncclInt32, ncclSum, 2, m.comm, m.stream));
    int32_t* v = to_device(std::vector<int32_t>{r + 2, -r});
    int32_t* p = to_device(std::vector<int32_t>(2, 0));
    int32_t* hi = to_device(std::vector<int32_t>(2, 0));
    int32_t* lo = to_device(std::vector<int32_t>(2, 0));
    TRY(ncclGroupStart());  // several collectives in one group
    TRY(ncclAllReduce(v, p, 2, ncclInt32, ncclProd, m.comm, m.stream));
    TRY(ncclAllReduce(v, hi, 2, ncclInt32, ncclMax, m.comm, m.stream));
    TRY(ncclAllReduce(v, lo, 2, ncclInt32, ncclMin, m.comm, m.stream));
    TRY(ncclGroupEnd());
    sync(m);
    bcast[size_t(r)] = to_host(b, 2);
    gathered[size_t(r)] = to_host(all, 2 * n);
    scattered[size_t(r)] = to_host(rs_out, 2);
    reduced[size_t(r)] = to_host(red_out, 2);
    prod[size_t(r)] = to_host(p, 2);
    mx[size_t(r)] = to_host(hi, 2);
    mn[size_t(r)] = to_host(lo, 2);
    for (void* q : {(void*)b, (void*)mine, (void*)all, (void*)rs_in, (void*)rs_out, (void*)red, (void*)red_out,
                    (void*)v, (void*)p, (void*)hi, (void*)lo})
      cudaFree(q);
  })));
  for (int r = 0; r < n; ++r) {
    CHECK(bcast[size_t(r)] == std::vector<int32_t>{7, 8});
    CHECK(gathered[size_t(r)] == std::vector<int32_t>{0, 10, 1, 11, 2, 12});
    CHECK(scattered[size_t(r)] == std::vector<int32_t>{6 * (2 * r + 1), 6 * (2 * r + 2)});
    CHECK(reduced[size_t(r)] == (r == 2 ? std::vector<int32_t>{6, -3} : std::vector<int32_t>{-5, -5}));
    CHECK(prod[size_t(r)] == std::vector<int32_t>{2 * 3 * 4, 0});
    CHECK(mx[size_t(r)] == std::vector<int32_t>{4, 0});
    CHECK(mn[size_t(r)] == std::vector<int32_t>{2, -2});
  }
  destroy(members);
}

TEST_CASE("emulated nccl: split into halves, with NCCL_SPLIT_NOCOLOR", "[emulated_nccl]") {
  TimeLimit limit(60);
  const int n = 4;
  auto members = make_members(n);
  std::vector<int> sizes(n), ranks(n), nulls(n);
  std::vector<std::vector<float>> sums(n);
  REQUIRE(all_ok(on_threads(n, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    // Halves {0, 1} and {2, 3}, keys reversing the order inside each half.
    ncclComm_t half = nullptr;
    TRY(ncclCommSplit(m.comm, r / 2, -r, &half, nullptr));
    TRY(ncclCommCount(half, &sizes[size_t(r)]));
    TRY(ncclCommUserRank(half, &ranks[size_t(r)]));
    float* x = to_device(std::vector<float>{float(r)});
    TRY(ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, half, m.stream));
    sync(m);
    sums[size_t(r)] = to_host(x, 1);
    // Rank 3 joins no group; the rest form one (non-blocking, polled).
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t rest = nullptr;
    ncclResult_t started = ncclCommSplit(m.comm, r == 3 ? NCCL_SPLIT_NOCOLOR : 5, 0, &rest, &config);
    if (started != ncclInProgress && started != ncclSuccess) TRY(started);
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) TRY(ncclCommGetAsyncError(m.comm, &state));
    TRY(state);
    nulls[size_t(r)] = rest == nullptr;
    if (rest) {
      int count = 0;
      TRY(ncclCommCount(rest, &count));
      if (count != 3) throw std::runtime_error("the NOCOLOR split has " + std::to_string(count) + " ranks");
      TRY(ncclCommDestroy(rest));
    }
    TRY(ncclCommDestroy(half));
    cudaFree(x);
  })));
  CHECK(sizes == std::vector<int>{2, 2, 2, 2});
  CHECK(ranks == std::vector<int>{1, 0, 1, 0});
  CHECK(sums == std::vector<std::vector<float>>{{1}, {1}, {5}, {5}});
  CHECK(nulls == std::vector<int>{0, 0, 0, 1});
  destroy(members);
}

TEST_CASE("emulated nccl: non-blocking init from one thread inside a group", "[emulated_nccl]") {
  TimeLimit limit(60);
  const int n = 2;
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(n, nullptr);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    cudaSetDevice(r % gpus());
    REQUIRE(ncclCommInitRankConfig(&comms[size_t(r)], n, id, r, &config) == ncclSuccess);  // does not block
  }
  cudaSetDevice(0);
  REQUIRE(ncclGroupEnd() == ncclInProgress);
  for (ncclComm_t comm : comms) {
    ncclResult_t state = ncclInProgress;
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (state == ncclInProgress && std::chrono::steady_clock::now() < end) ncclCommGetAsyncError(comm, &state);
    REQUIRE(state == ncclSuccess);
  }
  // Finalize non-blockingly, then destroy.
  for (ncclComm_t comm : comms) {
    const ncclResult_t f = ncclCommFinalize(comm);
    REQUIRE((f == ncclInProgress || f == ncclSuccess));
    REQUIRE(wait_for_async_error(comm, 200ms) == ncclSuccess);
    REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
  }
}

namespace {

// Both ranks receive first (or both send first: sends are rendezvous, so that cannot complete
// either); checks the report and that aborting ends the waiting work cleanly.
void check_deadlock(bool send_first) {
  const int n = 2;
  auto members = make_members(n);
  std::vector<float*> buffers(n);
  std::vector<std::string> ended;
  std::atomic<bool> aborting{false};
  std::thread ranks([&] {
    ended = on_threads(n, [&](int r) {
      Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      buffers[size_t(r)] = to_device(std::vector<float>(8, 1.0f));
      float* b = buffers[size_t(r)];
      // Both links first: two ranks whose first use of their link is receive-only (or send-only)
      // would fail NCCL's link setup instead (test "link setup ..." below).
      connect_both_ways(m, 1 - r, b);
      if (send_first) TRY(ncclSend(b, 8, ncclFloat32, 1 - r, m.comm, m.stream));
      else TRY(ncclRecv(b, 8, ncclFloat32, 1 - r, m.comm, m.stream));
      // Where streams run work on the issuing thread, the first call itself waits until the
      // abort, after which the communicator is gone.
      if (aborting) return;
      if (send_first) TRY(ncclRecv(b, 8, ncclFloat32, 1 - r, m.comm, m.stream));
      else TRY(ncclSend(b, 8, ncclFloat32, 1 - r, m.comm, m.stream));
      sync(m);  // returns once the communicator is aborted
    });
  });
  for (const Member& m : members) REQUIRE(wait_for_async_error(m.comm, 20s) == ncclInvalidUsage);
  const std::string text = ncclGetLastError(members[0].comm);
  const std::string call = send_first ? "ncclSend to rank " : "ncclRecv from rank ";
  CHECK_THAT(text, Contains("deadlock"));
  CHECK_THAT(text, Contains("rank 0 waits in " + call + "1 (count 8, f32)"));
  CHECK_THAT(text, Contains("rank 1 waits in " + call + "0 (count 8, f32)"));
  aborting = true;
  for (Member& m : members) {
    REQUIRE(ncclCommAbort(m.comm) == ncclSuccess);
    m.comm = nullptr;
  }
  ranks.join();
  CHECK(all_ok(ended));  // the aborted work ended cleanly: no CUDA error on the streams
  for (float* b : buffers) cudaFree(b);
  destroy(members);
}

}  // namespace

TEST_CASE("emulated nccl: two ranks of a communicator on one GPU are refused before NCCL 2.30.3", "[emulated_nccl]") {
  // NCCL's init fails with "Duplicate GPU detected" for ranks sharing a device, unless it is 2.30.3
  // or newer and NCCL_MULTI_RANK_GPU_ENABLE=1 (the header here is older: the refusal).
  if (NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 3)) {
    WARN("nccl.h is 2.30.3 or newer: sharing a GPU is allowed when asked, so there is no refusal to check");
    return;
  }
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<ncclComm_t> comms(2, nullptr);
  const std::vector<std::string> errors = on_threads(2, [&](int r) {
    if (cudaSetDevice(0) != cudaSuccess) throw std::runtime_error("cudaSetDevice(0)");
    TRY(ncclCommInitRank(&comms[size_t(r)], 2, id, r));
  });
  for (const std::string& e : errors) {
    CHECK_THAT(e, Catch::Contains("invalid usage") && Catch::Contains("Duplicate GPU detected: rank 0 and rank 1 both on "
                                                                      "CUDA device 0"));
  }
  for (ncclComm_t c : comms)
    if (c != nullptr) ncclCommAbort(c);
}

TEST_CASE("emulated nccl: a deadlock is reported with what every rank waits for", "[emulated_nccl]") {
  TimeLimit limit(60);
  SECTION("both receive first") { check_deadlock(false); }
  SECTION("both send first, without a group") { check_deadlock(true); }
}

TEST_CASE("emulated nccl: a count or type mismatch names both sides", "[emulated_nccl]") {
  TimeLimit limit(60);
  auto members = make_members(2);
  REQUIRE(all_ok(on_threads(2, [&](int r) {
    Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    float* x = to_device(std::vector<float>(8, 2.0f));
    if (r == 0) TRY(ncclSend(x, 8, ncclFloat32, 1, m.comm, m.stream));
    else TRY(ncclRecv(x, 4, ncclFloat32, 0, m.comm, m.stream));
    sync(m);
    cudaFree(x);
  })));
  for (const Member& m : members) {
    ncclResult_t state;
    REQUIRE(ncclCommGetAsyncError(m.comm, &state) == ncclSuccess);
    CHECK(state == ncclInvalidUsage);
    const std::string text = ncclGetLastError(m.comm);
    CHECK_THAT(text, Contains("rank 0's ncclSend to rank 1 has count 8, f32"));
    CHECK_THAT(text, Contains("rank 1's ncclRecv from rank 0 has count 4, f32"));
  }
  for (Member& m : members) {
    ncclCommAbort(m.comm);
    m.comm = nullptr;
  }
  // Collectives: a datatype mismatch.
  auto trio = make_members(2);
  REQUIRE(all_ok(on_threads(2, [&](int r) {
    Member& m = trio[size_t(r)];
    cudaSetDevice(m.device);
    float* x = to_device(std::vector<float>(2, 1.0f));
    TRY(ncclAllReduce(x, x, 2, r == 0 ? ncclFloat32 : ncclInt32, ncclSum, m.comm, m.stream));
    sync(m);
    cudaFree(x);
  })));
  CHECK_THAT(ncclGetLastError(trio[0].comm), Contains("rank 0 called ncclAllReduce (count 2, f32, sum) but rank 1 "
                                                      "called ncclAllReduce (count 2, i32, sum)"));
  for (Member& m : trio) {
    ncclCommAbort(m.comm);
    m.comm = nullptr;
  }
  destroy(trio);
  destroy(members);
}

TEST_CASE("emulated nccl: abort wakes a blocked receive; a bad pointer is a CUDA fault", "[emulated_nccl]") {
  TimeLimit limit(60);
  auto members = make_members(2);
  // The link connected first, so that the receive waits on its stream (a receive whose link is not
  // connected waits in the host instead: test "link setup: abort ..." below).
  std::vector<float*> scratch(2);
  REQUIRE(all_ok(on_threads(2, [&](int r) {
    cudaSetDevice(members[size_t(r)].device);
    scratch[size_t(r)] = to_device(std::vector<float>(2, 0.0f));
    connect_both_ways(members[size_t(r)], 1 - r, scratch[size_t(r)]);
  })));
  float* x = nullptr;
  std::atomic<bool> returned{false};
  std::string error;
  std::thread receiver([&] {
    try {
      Member& m = members[0];
      cudaSetDevice(m.device);
      x = to_device(std::vector<float>(8, 0.0f));
      TRY(ncclRecv(x, 8, ncclFloat32, 1, m.comm, m.stream));  // rank 1 never sends
      sync(m);
    } catch (const std::exception& e) {
      error = e.what();
    }
    returned = true;
  });
  std::this_thread::sleep_for(300ms);
  CHECK(!returned);
  ncclResult_t state;
  REQUIRE(ncclCommGetAsyncError(members[0].comm, &state) == ncclSuccess);
  CHECK(state == ncclSuccess);  // rank 1 has nothing running: not a deadlock, just waiting
  REQUIRE(ncclCommAbort(members[0].comm) == ncclSuccess);
  members[0].comm = nullptr;
  receiver.join();
  CHECK(error.empty());
  CHECK_THAT(ncclGetLastError(nullptr), Contains("it was waiting in ncclRecv from rank 1 (count 8, f32)"));
  cudaFree(x);
  for (float* p : scratch) cudaFree(p);
  // A host pointer: the work faults, as an illegal address does on a GPU.
  std::vector<float> host(4, 1.0f);
  Member& m = members[1];
  cudaSetDevice(m.device);
  float* landing = to_device(std::vector<float>(4, 0.0f));
  // A send to itself needs its receive in the same group (NCCL refuses a lone one).
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(host.data(), 4, ncclFloat32, 1, m.comm, m.stream) == ncclSuccess);
  REQUIRE(ncclRecv(landing, 4, ncclFloat32, 1, m.comm, m.stream) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  cudaError_t fault = cudaStreamSynchronize(m.stream);
  if (fault == cudaSuccess) fault = cudaGetLastError();  // work that ran on this thread reports here
  CHECK(fault == cudaErrorLaunchFailure);
  CHECK(wait_for_async_error(m.comm, 1s) == ncclUnhandledCudaError);
  CHECK_THAT(ncclGetLastError(m.comm), Contains("not inside one device allocation"));
  ncclCommAbort(m.comm);
  m.comm = nullptr;
  cudaFree(landing);
  destroy(members);
}

// ---- first-use link setup (nccl_connect.cpp) ---------------------------------------------------------
//
// What the expectations below follow: NCCL's setup (src/transport.cc, ncclTransportP2pSetup) as the
// emulator's comment restates it — round i = 1..n-1 pairs rank r with recvPeer r-i and sendPeer
// r+i; with two peers, r posts its receive info to recvPeer and its send info to sendPeer (each only
// when it sets that link up), then waits for sendPeer's message, then for recvPeer's; with one peer,
// one message each way carries both, and a bigger message than expected is "Message truncated".

namespace {

// True when the emulator runs stream work on the issuing thread at once. Then a transfer that waits
// for a peer blocks its issuing thread inside ncclGroupEnd, with comm/nccl_lanes.cpp's lock held, so the
// watchdog cannot abort it: the timeout cases need asynchronous streams. So do the link-setup cases
// that drive several ranks from one thread: a group's task waits for its setup on the issuing
// thread, and the peer's mirror setup would come from that same thread only afterwards.
bool streams_run_inline() {
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  auto ran = std::make_shared<std::atomic<bool>>(false);
  brigade::emu::enqueue(s, "probe", {}, [ran] {
    std::this_thread::sleep_for(20ms);
    *ran = true;
    return std::string();
  });
  const bool inline_ = *ran;
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  return inline_;
}

// The link-setup cases that drive several ranks from one thread skip, with a warning, where
// streams run inline (above).
bool one_thread_cannot_drive_setups() {
  if (!streams_run_inline()) return false;
  WARN("the emulator runs stream work on the issuing thread: one thread cannot drive both ranks' setups");
  return true;
}

// Polls until `comm` is no longer ncclInProgress (or `limit` passes); returns its state.
ncclResult_t wait_ready(ncclComm_t comm, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && std::chrono::steady_clock::now() < end) {
    ncclCommGetAsyncError(comm, &state);
    if (state == ncclInProgress) std::this_thread::sleep_for(1ms);
  }
  return state;
}

// n ranks with non-blocking communicators, initialised from this thread in one group, rank r on
// device r, each with its own stream.
std::vector<Member> make_nonblocking_members(int n) {
  REQUIRE(n <= gpus());
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<Member> members(static_cast<size_t>(n));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; ++r) {
    members[size_t(r)].device = r;
    cudaSetDevice(r);
    REQUIRE(ncclCommInitRankConfig(&members[size_t(r)].comm, n, id, r, &config) == ncclSuccess);
  }
  REQUIRE(ncclGroupEnd() == ncclInProgress);
  for (Member& m : members) {
    REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
    cudaSetDevice(m.device);
    REQUIRE(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking) == cudaSuccess);
  }
  cudaSetDevice(0);
  return members;
}

}  // namespace

TEST_CASE("emulated nccl: link setup: a send/receive pair connects once, later groups need none",
          "[emulated_nccl][connect]") {
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  auto members = make_nonblocking_members(2);
  std::vector<float*> out(2), in(2);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    out[size_t(r)] = to_device(std::vector<float>{float(r + 1), 0.5f, -2.0f, float(10 * r)});
    in[size_t(r)] = to_device(std::vector<float>(4, -1.0f));
  }
  // Both ranks from this thread, in one group: each rank sets up in a job of its own (NCCL runs one
  // per communicator), or rank 0's setup would wait for rank 1's before it could start.
  auto exchange = [&] {
    ncclGroupStart();
    for (int r = 0; r < 2; ++r) {
      const Member& m = members[size_t(r)];
      ncclSend(out[size_t(r)], 4, ncclFloat32, 1 - r, m.comm, m.stream);
      ncclRecv(in[size_t(r)], 4, ncclFloat32, 1 - r, m.comm, m.stream);
    }
    return ncclGroupEnd();
  };
  auto received = [&](int r) {
    sync(members[size_t(r)]);
    cudaSetDevice(r);
    return to_host(in[size_t(r)], 4);
  };
  // First use: the links are set up in the background, so the group is in progress until they are.
  REQUIRE(exchange() == ncclInProgress);
  for (const Member& m : members) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
  CHECK(received(0) == std::vector<float>{2.0f, 0.5f, -2.0f, 10.0f});
  CHECK(received(1) == std::vector<float>{1.0f, 0.5f, -2.0f, 0.0f});
  // Connected for good: later groups set nothing up. Their return codes cannot show it (a recent
  // NCCL may answer ncclInProgress for every non-blocking group), so: the same group again runs,
  // and then rank 0's send alone settles to ncclSuccess before rank 1 has called anything — which
  // a setup could not, as it would wait for rank 1's mirror setup.
  auto issued = [](ncclResult_t e) { return e == ncclSuccess || e == ncclInProgress; };
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    REQUIRE(cudaMemset(in[size_t(r)], 0, 4 * sizeof(float)) == cudaSuccess);
  }
  REQUIRE(issued(exchange()));
  for (const Member& m : members) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
  CHECK(received(0) == std::vector<float>{2.0f, 0.5f, -2.0f, 10.0f});
  CHECK(received(1) == std::vector<float>{1.0f, 0.5f, -2.0f, 0.0f});
  cudaSetDevice(1);
  REQUIRE(cudaMemset(in[1], 0, 4 * sizeof(float)) == cudaSuccess);
  cudaSetDevice(0);
  REQUIRE(issued(ncclSend(out[0], 4, ncclFloat32, 1, members[0].comm, members[0].stream)));
  CHECK(wait_ready(members[0].comm, 2s) == ncclSuccess);  // rank 1 has called nothing yet
  cudaSetDevice(1);
  REQUIRE(issued(ncclRecv(in[1], 4, ncclFloat32, 0, members[1].comm, members[1].stream)));
  REQUIRE(wait_ready(members[1].comm, 20s) == ncclSuccess);
  CHECK(received(1) == std::vector<float>{1.0f, 0.5f, -2.0f, 0.0f});
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    cudaFree(out[size_t(r)]);
    cudaFree(in[size_t(r)]);
  }
  destroy(members);
}

TEST_CASE("emulated nccl: link setup: three ranks that first only send wait in a cycle until aborted",
          "[emulated_nccl][connect]") {
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  // By hand, n = 3, each rank r's first group only sends to r+1. Round i = 1: recvPeer = r-1,
  // sendPeer = r+1. Rank r receives from nobody, so it posts no receive info to r-1; it posts its
  // send info to r+1, then waits for r+1's receive info under tag 1 << 8 — which r+1 never posts, as
  // its group does not receive from r. Rank 0 waits for 1, 1 for 2, 2 for 0: a cycle in which no
  // message is ever compared, so no truncation either. Every rank of the communicator is in this
  // process and in a setup (which lets it issue nothing more), so the emulator names the deadlock
  // at once, as every rank's asynchronous error; the ranks still refuse further calls, and wait
  // until aborted.
  auto members = make_nonblocking_members(3);
  std::vector<float*> x(3);
  for (int r = 0; r < 3; ++r) {
    const Member& m = members[size_t(r)];
    cudaSetDevice(m.device);
    x[size_t(r)] = to_device(std::vector<float>(2, float(r)));
    REQUIRE(ncclSend(x[size_t(r)], 2, ncclFloat32, (r + 1) % 3, m.comm, m.stream) == ncclInProgress);
  }
  // Well before BRIGADE_EMULATED_NCCL_TIMEOUT (300 s by default, unset here).
  for (const Member& m : members) CHECK(wait_ready(m.comm, 10s) == ncclInvalidUsage);
  for (const Member& m : members) {
    const std::string report = ncclGetLastError(m.comm);
    CHECK_THAT(report, Contains("deadlock on communicator"));
    CHECK_THAT(report, Contains("rank 0 waits in the link setup with rank 1 (rank 0 sets up only sending), tag 256"));
    CHECK_THAT(report, Contains("rank 1 waits in the link setup with rank 2 (rank 1 sets up only sending), tag 256"));
    CHECK_THAT(report, Contains("rank 2 waits in the link setup with rank 0 (rank 2 sets up only sending), tag 256"));
  }
  cudaSetDevice(1);
  CHECK(ncclRecv(x[1], 2, ncclFloat32, 0, members[1].comm, members[1].stream) == ncclInvalidArgument);
  CHECK_THAT(ncclGetLastError(nullptr), Contains("Attempt to use communicator before the previous operation returned ncclSuccess"));
  // Each abort ends promptly. (Its text is not checked here: the setup that waited for the aborted
  // rank races it for the process's last error. The test "abort ends a setup ..." checks it.)
  for (int r = 0; r < 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(ncclCommAbort(members[size_t(r)].comm) == ncclSuccess);
    members[size_t(r)].comm = nullptr;
    CHECK(std::chrono::steady_clock::now() - start < 5s);
  }
  for (int r = 0; r < 3; ++r) {
    cudaSetDevice(r);
    cudaFree(x[size_t(r)]);
  }
  destroy(members);
}

TEST_CASE("emulated nccl: link setup: two ranks that set up different directions fail", "[emulated_nccl][connect]") {
  TimeLimit limit(60);
  auto members = make_members(2);
  std::vector<ncclResult_t> ended(2, ncclSuccess);
  std::vector<std::vector<float>> landed(2);
  SECTION("different sizes: Message truncated") {
    // By hand, n = 2: one round (i = 1) whose sendPeer and recvPeer are both the other rank, so one
    // message each way. Rank 0 sets up sending and receiving: it sends the info of 2 channels and
    // expects 2. Rank 1 sets up only sending: it sends 1 and expects 1. Rank 1 gets 2 > 1: NCCL's
    // bootstrap fails with "Message truncated" (ncclInternalError). Rank 0 gets 1 < 2, which NCCL
    // reads on past (undefined): an error here too. No kernel runs: rank 0's buffer keeps its values.
    REQUIRE(all_ok(on_threads(2, [&](int r) {
      const Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      float* out = to_device(std::vector<float>(4, 5.0f));
      float* in = to_device(std::vector<float>(4, -1.0f));
      TRY(ncclGroupStart());
      TRY(ncclSend(out, 4, ncclFloat32, 1 - r, m.comm, m.stream));
      if (r == 0) TRY(ncclRecv(in, 4, ncclFloat32, 1, m.comm, m.stream));
      ended[size_t(r)] = ncclGroupEnd();  // blocking: waits for the setup
      sync(m);
      landed[size_t(r)] = to_host(in, 4);
      cudaFree(out);
      cudaFree(in);
    })));
    CHECK(ended == std::vector<ncclResult_t>{ncclInternalError, ncclInternalError});
    CHECK(landed[0] == std::vector<float>(4, -1.0f));
    const std::string one = ncclGetLastError(members[1].comm), zero = ncclGetLastError(members[0].comm);
    CHECK_THAT(one, Contains("link setup between rank 1 and rank 0"));
    CHECK_THAT(one, Contains("Message truncated : received the connection info of 2 channel(s) instead of 1"));
    CHECK_THAT(one, Contains("rank 1's group sets up only sending with rank 0, rank 0's group sets up sending and "
                             "receiving with rank 1"));
    CHECK_THAT(zero, Contains("received the connection info of 1 channel(s) where 2 were expected"));
  }
  SECTION("the same size, mirrored wrongly: both only receive") {
    // By hand, n = 2: each sends the info of its one receive channel and expects one: the sizes
    // match, but each takes the other's receive info for send info — undefined in NCCL, an error here.
    REQUIRE(all_ok(on_threads(2, [&](int r) {
      const Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      float* in = to_device(std::vector<float>(4, -1.0f));
      ended[size_t(r)] = ncclRecv(in, 4, ncclFloat32, 1 - r, m.comm, m.stream);
      sync(m);
      cudaFree(in);
    })));
    CHECK(ended == std::vector<ncclResult_t>{ncclInternalError, ncclInternalError});
    for (const Member& m : members)
      CHECK_THAT(ncclGetLastError(m.comm), Contains("has the right size but describes the wrong direction"));
  }
  for (Member& m : members) {
    ncclCommAbort(m.comm);
    m.comm = nullptr;
  }
  destroy(members);
}

TEST_CASE("emulated nccl: link setup: a non-blocking communicator is in progress and refuses calls meanwhile",
          "[emulated_nccl][connect]") {
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  auto members = make_nonblocking_members(2);
  cudaSetDevice(0);
  float* x = to_device(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  cudaSetDevice(1);
  float* y = to_device(std::vector<float>(4, -1.0f));
  // Rank 0's send sets up its link in the background and waits there for rank 1's side.
  cudaSetDevice(0);
  REQUIRE(ncclSend(x, 4, ncclFloat32, 1, members[0].comm, members[0].stream) == ncclInProgress);
  std::this_thread::sleep_for(100ms);
  ncclResult_t state = ncclSuccess;
  REQUIRE(ncclCommGetAsyncError(members[0].comm, &state) == ncclSuccess);
  CHECK(state == ncclInProgress);
  CHECK(ncclSend(x, 4, ncclFloat32, 1, members[0].comm, members[0].stream) == ncclInvalidArgument);
  CHECK_THAT(ncclGetLastError(nullptr), Contains("Attempt to use communicator before the previous operation returned ncclSuccess"));
  // Rank 1's receive sets up the mirror direction: both settle, and the data arrives.
  cudaSetDevice(1);
  REQUIRE(ncclRecv(y, 4, ncclFloat32, 0, members[1].comm, members[1].stream) == ncclInProgress);
  for (const Member& m : members) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
  sync(members[1]);
  cudaSetDevice(1);
  CHECK(to_host(y, 4) == std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  cudaFree(y);
  cudaSetDevice(0);
  cudaFree(x);
  destroy(members);
}

TEST_CASE("emulated nccl: collectives connect each algorithm at its first use, waiting for every rank",
          "[emulated_nccl][connect]") {
  // NCCL_RUNTIME_CONNECT=1 (the default): a communicator's first collective of an algorithm connects
  // that algorithm inside ncclGroupEnd, waiting for the other ranks to reach theirs (NCCL's source,
  // src/group.cc and src/enqueue.cc; nccl_connect.cpp). Modelled: a small all-reduce is a tree, a
  // large one (over 64 KiB) and a broadcast a ring. With NCCL_RUNTIME_CONNECT=0 init connects them.
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  auto issued = [](ncclResult_t e) { return e == ncclSuccess || e == ncclInProgress; };
  // Rank `r` issues `call` alone; true when it settles before the other rank has called anything.
  const char* saved = std::getenv("NCCL_RUNTIME_CONNECT");
  const std::string restore = saved ? saved : "";
  for (const bool runtime : {true, false}) {
    if (runtime) unsetenv("NCCL_RUNTIME_CONNECT");
    else setenv("NCCL_RUNTIME_CONNECT", "0", 1);
    auto members = make_nonblocking_members(2);
    const size_t small = 4, large = 20000;  // 16 bytes (a tree); 80000 bytes (a ring)
    std::vector<float*> buffers(2);
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      buffers[size_t(r)] = to_device(std::vector<float>(large, float(r + 1)));
    }
    auto all_reduce = [&](int r, size_t count) {
      cudaSetDevice(r);
      const Member& m = members[size_t(r)];
      return ncclAllReduce(buffers[size_t(r)], buffers[size_t(r)], count, ncclFloat32, ncclSum, m.comm, m.stream);
    };
    // Rank 0 alone first, then rank 1; `waits`: rank 0 must still be in progress before rank 1 calls.
    auto both = [&](const std::function<ncclResult_t(int)>& call, bool waits) {
      REQUIRE(issued(call(0)));
      if (waits) {
        std::this_thread::sleep_for(100ms);
        ncclResult_t state = ncclSuccess;
        REQUIRE(ncclCommGetAsyncError(members[0].comm, &state) == ncclSuccess);
        CHECK(state == ncclInProgress);
      } else {
        CHECK(wait_ready(members[0].comm, 5s) == ncclSuccess);  // rank 1 has called nothing yet
      }
      REQUIRE(issued(call(1)));
      for (const Member& m : members) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
    };
    INFO((runtime ? "NCCL_RUNTIME_CONNECT unset (1)" : "NCCL_RUNTIME_CONNECT=0"));
    both([&](int r) { return all_reduce(r, small); }, runtime);   // the tree's first use
    both([&](int r) { return all_reduce(r, small); }, false);     // connected
    both([&](int r) { return all_reduce(r, large); }, runtime);   // the ring's first use
    both([&](int r) {                                              // a ring too: connected
      cudaSetDevice(r);
      const Member& m = members[size_t(r)];
      return ncclBroadcast(buffers[size_t(r)], buffers[size_t(r)], small, ncclFloat32, 1, m.comm, m.stream);
    }, false);
    // What ran: 1 + 2 = 3, twice summed (6 then 12) on the first 4 elements, then broadcast from
    // rank 1 (the same); the rest summed once (3).
    for (int r = 0; r < 2; ++r) {
      sync(members[size_t(r)]);
      cudaSetDevice(r);
      const std::vector<float> got = to_host(buffers[size_t(r)], large);
      CHECK(std::vector<float>(got.begin(), got.begin() + small) == std::vector<float>(small, 12.0f));
      CHECK(std::vector<float>(got.begin() + small, got.end()) == std::vector<float>(large - small, 3.0f));
      cudaFree(buffers[size_t(r)]);
    }
    destroy(members);
  }
  if (saved) setenv("NCCL_RUNTIME_CONNECT", restore.c_str(), 1);
  else unsetenv("NCCL_RUNTIME_CONNECT");
}

TEST_CASE("emulated nccl: a split blocks as its parent does; the child takes its config's mode",
          "[emulated_nccl][connect]") {
  // NCCL runs the split as a job of the parent's group, whose blocking mode is the parent's
  // (src/group.cc); the child's later calls follow the config given to the split. A child's mode
  // shows at its first collective, which connects (nccl_connect.cpp): a non-blocking child answers
  // ncclInProgress, a blocking one waits and answers ncclSuccess.
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  SECTION("a blocking parent, a non-blocking child") {
    auto members = make_members(2);
    std::atomic<bool> returned0{false}, called1{false};
    bool rank1_called_before_rank0_returned = false;
    std::vector<ncclComm_t> children(2, nullptr);
    std::vector<ncclResult_t> first(2, ncclInternalError);
    std::vector<std::vector<float>> sums(2);
    REQUIRE(all_ok(on_threads(2, [&](int r) {
      Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      if (r == 1) {  // after rank 0's split returns, or 500 ms: a blocking split returns only now
        for (int i = 0; i < 500 && !returned0; ++i) std::this_thread::sleep_for(1ms);
        called1 = true;
      }
      TRY(ncclCommSplit(m.comm, 0, r, &children[size_t(r)], &config));
      if (r == 0) {
        rank1_called_before_rank0_returned = called1;
        returned0 = true;
      }
      if (children[size_t(r)] == nullptr) throw std::runtime_error("no child when the blocking split returned");
      float* x = to_device(std::vector<float>{float(r + 1)});
      first[size_t(r)] = ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, children[size_t(r)], m.stream);
      if (wait_ready(children[size_t(r)], 20s) != ncclSuccess) throw std::runtime_error("the child's all-reduce failed");
      sync(m);
      sums[size_t(r)] = to_host(x, 1);
      cudaFree(x);
    })));
    CHECK(rank1_called_before_rank0_returned);
    CHECK(first == std::vector<ncclResult_t>{ncclInProgress, ncclInProgress});
    CHECK(sums == std::vector<std::vector<float>>{{3}, {3}});
    for (ncclComm_t child : children) CHECK(ncclCommDestroy(child) == ncclSuccess);
    destroy(members);
  }
  SECTION("a non-blocking parent, a blocking child") {
    auto members = make_nonblocking_members(2);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    std::vector<ncclComm_t> children(2, nullptr);
    // Both from this thread: rank 0's split returns before rank 1 has called, so it cannot be done.
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      REQUIRE(ncclCommSplit(members[size_t(r)].comm, 0, r, &children[size_t(r)], &config) == ncclSuccess);
      if (r == 0) CHECK(children[0] == nullptr);
    }
    for (const Member& m : members) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
    REQUIRE(children[0] != nullptr);
    REQUIRE(children[1] != nullptr);
    std::vector<ncclResult_t> first(2, ncclInternalError);
    std::vector<std::vector<float>> sums(2);
    REQUIRE(all_ok(on_threads(2, [&](int r) {
      Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      float* x = to_device(std::vector<float>{float(r + 1)});
      first[size_t(r)] = ncclAllReduce(x, x, 1, ncclFloat32, ncclSum, children[size_t(r)], m.stream);
      sync(m);
      sums[size_t(r)] = to_host(x, 1);
      cudaFree(x);
    })));
    CHECK(first == std::vector<ncclResult_t>{ncclSuccess, ncclSuccess});
    CHECK(sums == std::vector<std::vector<float>>{{3}, {3}});
    for (ncclComm_t child : children) CHECK(ncclCommDestroy(child) == ncclSuccess);
    destroy(members);
  }
}

TEST_CASE("emulated nccl: link setup: abort ends a setup that waits for a peer that never comes",
          "[emulated_nccl][connect]") {
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  SECTION("non-blocking: the waiting rank aborts") {
    auto members = make_nonblocking_members(2);
    cudaSetDevice(0);
    float* x = to_device(std::vector<float>(4, 0.0f));
    REQUIRE(ncclRecv(x, 4, ncclFloat32, 1, members[0].comm, members[0].stream) == ncclInProgress);
    std::this_thread::sleep_for(200ms);
    CHECK(wait_ready(members[0].comm, 1ms) == ncclInProgress);
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(ncclCommAbort(members[0].comm) == ncclSuccess);
    members[0].comm = nullptr;
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    CHECK_THAT(ncclGetLastError(nullptr),
               Contains("it was waiting in the link setup with rank 1 (rank 0 sets up only receiving)"));
    sync(members[0]);  // the receive's task ended without running
    cudaFree(x);
    destroy(members);
  }
  SECTION("blocking: the peer aborts, and the waiting call returns its error") {
    auto members = make_members(2);
    ncclResult_t returned = ncclSuccess;
    std::atomic<bool> done{false};
    std::thread waiting([&] {
      const Member& m = members[1];
      cudaSetDevice(m.device);
      float* x = to_device(std::vector<float>(4, 0.0f));
      returned = ncclRecv(x, 4, ncclFloat32, 0, m.comm, m.stream);  // rank 0 never sends
      done = true;
      cudaStreamSynchronize(m.stream);
      cudaFree(x);
    });
    std::this_thread::sleep_for(300ms);
    CHECK(!done);  // the host waits in the setup, as NCCL's blocking ncclGroupEnd does
    REQUIRE(ncclCommAbort(members[0].comm) == ncclSuccess);
    members[0].comm = nullptr;
    waiting.join();
    CHECK(returned == ncclRemoteError);
    CHECK_THAT(ncclGetLastError(members[1].comm),
               Contains("rank 0 called ncclCommAbort while rank 1 of 2"));
    CHECK_THAT(ncclGetLastError(members[1].comm),
               Contains("waited in the link setup with rank 0 (rank 1 sets up only receiving)"));
    ncclCommAbort(members[1].comm);
    members[1].comm = nullptr;
    destroy(members);
  }
  SECTION("blocking: the waiting rank is aborted from another thread, and its call returns an error") {
    // Nothing ran: success would hide that. ncclSystemError, as for an init or split an abort cut short.
    auto members = make_members(2);
    const ncclComm_t comm = members[1].comm;
    const cudaStream_t stream = members[1].stream;
    ncclResult_t returned = ncclSuccess;
    std::atomic<bool> done{false};
    std::thread waiting([&] {
      cudaSetDevice(1);
      float* x = to_device(std::vector<float>(4, 0.0f));
      returned = ncclRecv(x, 4, ncclFloat32, 0, comm, stream);  // rank 0 never sends
      done = true;
      cudaStreamSynchronize(stream);
      cudaFree(x);
    });
    std::this_thread::sleep_for(300ms);
    CHECK(!done);
    REQUIRE(ncclCommAbort(members[1].comm) == ncclSuccess);
    members[1].comm = nullptr;
    waiting.join();
    CHECK(returned == ncclSystemError);
    CHECK_THAT(ncclGetLastError(nullptr), Contains("aborted while the group was set up; nothing ran"));
    destroy(members);
  }
}

TEST_CASE("emulated nccl: link setup: ranks n/2 apart exchange both directions' info in one message each way",
          "[emulated_nccl][connect]") {
  // By hand, n = 4, ranks 0 and 2: in round i = 2 each one's sendPeer and recvPeer is the other
  // (distance n/2), so one message each way carries both directions' info, as with n = 2. Ranks 1
  // and 3 take no part. Mirrored groups connect and the data arrives; a group that sets up only
  // sending against one that sets up both gets the info of 2 channels where it expects 1: "Message
  // truncated" (with ranks at another distance it would be a wait, not a size check).
  TimeLimit limit(60);
  auto members = make_members(4);
  std::vector<ncclResult_t> ended(4, ncclSuccess);
  std::vector<std::vector<float>> landed(4);
  SECTION("mirrored: both send and receive") {
    REQUIRE(all_ok(on_threads(4, [&](int r) {
      if (r % 2 == 1) return;
      const Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      float* out = to_device(std::vector<float>(3, float(r + 1)));
      float* in = to_device(std::vector<float>(3, -1.0f));
      TRY(ncclGroupStart());
      TRY(ncclSend(out, 3, ncclFloat32, 2 - r, m.comm, m.stream));
      TRY(ncclRecv(in, 3, ncclFloat32, 2 - r, m.comm, m.stream));
      ended[size_t(r)] = ncclGroupEnd();
      sync(m);
      landed[size_t(r)] = to_host(in, 3);
      cudaFree(out);
      cudaFree(in);
    })));
    CHECK(ended == std::vector<ncclResult_t>(4, ncclSuccess));
    CHECK(landed[0] == std::vector<float>(3, 3.0f));
    CHECK(landed[2] == std::vector<float>(3, 1.0f));
  }
  SECTION("rank 2 sets up only sending: Message truncated") {
    REQUIRE(all_ok(on_threads(4, [&](int r) {
      if (r % 2 == 1) return;
      const Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      float* out = to_device(std::vector<float>(3, 1.0f));
      float* in = to_device(std::vector<float>(3, -1.0f));
      TRY(ncclGroupStart());
      TRY(ncclSend(out, 3, ncclFloat32, 2 - r, m.comm, m.stream));
      if (r == 0) TRY(ncclRecv(in, 3, ncclFloat32, 2, m.comm, m.stream));
      ended[size_t(r)] = ncclGroupEnd();
      sync(m);
      cudaFree(out);
      cudaFree(in);
    })));
    CHECK(ended[0] == ncclInternalError);
    CHECK(ended[2] == ncclInternalError);
    CHECK_THAT(ncclGetLastError(members[2].comm),
               Contains("Message truncated : received the connection info of 2 channel(s) instead of 1"));
  }
  for (Member& m : members) {
    ncclCommAbort(m.comm);
    m.comm = nullptr;
  }
  destroy(members);
}

TEST_CASE("emulated nccl: link setup: two setups on the same peer and tag meet in order",
          "[emulated_nccl][connect]") {
  // By hand, n = 2: rank 0's first group only sends to rank 1 (rank 1's only receives), which
  // connects 0 -> 1 under round 1's tags; a later pair of groups sets up 1 -> 0 under the same
  // (peer, tag). Each setup's messages must meet the same setup's takes (NCCL's sockets keep order),
  // so both connect and both data arrive; a third round in either direction sets nothing up.
  TimeLimit limit(60);
  auto members = make_members(2);
  std::vector<std::vector<float>> landed(2);
  auto one_way = [&](int from) {
    return on_threads(2, [&](int r) {
      const Member& m = members[size_t(r)];
      cudaSetDevice(m.device);
      float* x = to_device(std::vector<float>(2, r == from ? float(10 + from) : -1.0f));
      if (r == from) TRY(ncclSend(x, 2, ncclFloat32, 1 - r, m.comm, m.stream));
      else TRY(ncclRecv(x, 2, ncclFloat32, 1 - r, m.comm, m.stream));
      sync(m);
      landed[size_t(r)] = to_host(x, 2);
      cudaFree(x);
    });
  };
  REQUIRE(all_ok(one_way(0)));  // first setup: 0 sends, 1 receives
  CHECK(landed[1] == std::vector<float>(2, 10.0f));
  REQUIRE(all_ok(one_way(1)));  // second setup, same (peer, tag): 1 sends, 0 receives
  CHECK(landed[0] == std::vector<float>(2, 11.0f));
  // Both directions connected: rank 0's send alone is queued at once (blocking, it would otherwise
  // wait in its setup for rank 1), and rank 1's receive, later, takes it. (Not where streams run
  // inline: the send itself would then wait on this thread for the receive.)
  if (streams_run_inline()) {
    destroy(members);
    return;
  }
  cudaSetDevice(0);
  float* x = to_device(std::vector<float>(2, 7.0f));
  REQUIRE(ncclSend(x, 2, ncclFloat32, 1, members[0].comm, members[0].stream) == ncclSuccess);
  cudaSetDevice(1);
  float* y = to_device(std::vector<float>(2, -1.0f));
  REQUIRE(ncclRecv(y, 2, ncclFloat32, 0, members[1].comm, members[1].stream) == ncclSuccess);
  sync(members[1]);
  CHECK(to_host(y, 2) == std::vector<float>(2, 7.0f));
  sync(members[0]);
  cudaFree(y);
  cudaSetDevice(0);
  cudaFree(x);
  destroy(members);
}

TEST_CASE("emulated nccl: link setup: a group's work waits for every communicator's setup in it",
          "[emulated_nccl][connect]") {
  // The rule (NCCL's source, group.cc: the group's launch joins every communicator's setup job
  // before any kernel is launched): one thread, one group holding a send on communicator X, whose
  // link is not connected (its setup waits for X's rank 1), and a send on communicator Y, whose link
  // is. Y's send, though connected, must not run before X's setup is over: Y's rank 1 receives
  // nothing until X's rank 1 sets up its side.
  TimeLimit limit(60);
  if (one_thread_cannot_drive_setups()) return;
  auto x = make_nonblocking_members(2), y = make_nonblocking_members(2);
  auto issued = [](ncclResult_t e) { return e == ncclSuccess || e == ncclInProgress; };
  std::vector<float*> xbuf(2), ybuf(2);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    xbuf[size_t(r)] = to_device(std::vector<float>(2, r == 0 ? 4.0f : -1.0f));
    ybuf[size_t(r)] = to_device(std::vector<float>(2, r == 0 ? 6.0f : -1.0f));
  }
  // Y's link 0 -> 1 connected first.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(ybuf[0], 2, ncclFloat32, 1, y[0].comm, y[0].stream) == ncclSuccess);
  REQUIRE(ncclRecv(ybuf[1], 2, ncclFloat32, 0, y[1].comm, y[1].stream) == ncclSuccess);
  REQUIRE(issued(ncclGroupEnd()));
  for (const Member& m : y) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
  sync(y[1]);
  cudaSetDevice(1);
  REQUIRE(cudaMemset(ybuf[1], 0, 2 * sizeof(float)) == cudaSuccess);
  // The group: X's first use and Y's connected link.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  REQUIRE(ncclSend(xbuf[0], 2, ncclFloat32, 1, x[0].comm, x[0].stream) == ncclSuccess);
  REQUIRE(ncclSend(ybuf[0], 2, ncclFloat32, 1, y[0].comm, y[0].stream) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclInProgress);  // X's setup
  cudaSetDevice(1);
  REQUIRE(issued(ncclRecv(ybuf[1], 2, ncclFloat32, 0, y[1].comm, y[1].stream)));
  REQUIRE(wait_ready(y[1].comm, 20s) == ncclSuccess);  // connected: no setup of its own
  std::this_thread::sleep_for(300ms);
  CHECK(cudaStreamQuery(y[1].stream) == cudaErrorNotReady);  // Y's send has not run
  // X's rank 1 sets up its side: the group runs, on both communicators.
  REQUIRE(issued(ncclRecv(xbuf[1], 2, ncclFloat32, 0, x[1].comm, x[1].stream)));
  for (const auto* members : {&x, &y})
    for (const Member& m : *members) REQUIRE(wait_ready(m.comm, 20s) == ncclSuccess);
  sync(y[1]);
  sync(x[1]);
  cudaSetDevice(1);
  CHECK(to_host(ybuf[1], 2) == std::vector<float>(2, 6.0f));
  CHECK(to_host(xbuf[1], 2) == std::vector<float>(2, 4.0f));
  sync(x[0]);
  sync(y[0]);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    cudaFree(xbuf[size_t(r)]);
    cudaFree(ybuf[size_t(r)]);
  }
  destroy(x);
  destroy(y);
}

// ---- ranks as processes ------------------------------------------------------------------------------

namespace {

// Runs body(rank, id) in `n` forked children that get a fresh unique id through a pipe, and returns
// their exit codes (128 + N for signal N). A child never returns into Catch: an exception exits 2,
// and an alarm ends one that hangs; the parent kills what is left after `seconds` + 5.
std::vector<int> in_processes(int n, const std::function<int(int, const ncclUniqueId&)>& body,
                              unsigned seconds = 60, ncclUniqueId* used = nullptr) {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);  // creates no thread, so forking stays safe
  if (used) *used = id;
  std::vector<pid_t> children;
  for (int r = 0; r < n; ++r) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::fflush(nullptr);  // or the child would print what is still buffered here again
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[1]);
      alarm(seconds);
      ncclUniqueId mine;
      int code = 3;
      if (read(fds[0], &mine, sizeof mine) == ssize_t(sizeof mine)) {
        try {
          code = body(r, mine);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "process rank %d: %s\n", r, e.what());
          code = 2;
        }
      }
      _exit(code);
    }
    close(fds[0]);
    REQUIRE(write(fds[1], &id, sizeof id) == ssize_t(sizeof id));
    close(fds[1]);
    children.push_back(pid);
  }
  std::vector<int> codes(static_cast<size_t>(n), -1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds + 5);
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    while (waitpid(children[i], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) kill(children[i], SIGKILL);
      std::this_thread::sleep_for(10ms);
    }
    codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return codes;
}

// Prints why a child failed and returns its exit code.
int failed(int code, const std::string& why) {
  std::fprintf(stderr, "%s\n", why.c_str());
  return code;
}

}  // namespace

TEST_CASE("emulated nccl: ranks in separate processes exchange, reduce, broadcast and split", "[emulated_nccl]") {
  TimeLimit limit(90);
  ncclUniqueId id;
  const std::vector<int> codes = in_processes(3, [](int r, const ncclUniqueId& id) {
    const int n = 3;
    if (cudaSetDevice(r) != cudaSuccess) return failed(9, "cudaSetDevice");  // device r: the same GPU in every process
    Member m;
    m.device = r;
    TRY(ncclCommInitRank(&m.comm, n, id, r));
    cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking);
    float* out = to_device(std::vector<float>{float(r), 0.5f});
    float* in = to_device(std::vector<float>(2, -1.0f));
    TRY(ncclGroupStart());
    TRY(ncclSend(out, 2, ncclFloat32, (r + 1) % n, m.comm, m.stream));
    TRY(ncclRecv(in, 2, ncclFloat32, (r + n - 1) % n, m.comm, m.stream));
    TRY(ncclGroupEnd());
    float* sum = to_device(std::vector<float>{1e8f * float(1 - r), float(r) + 0.25f});  // 1e8, 0, -1e8
    TRY(ncclAllReduce(sum, sum, 2, ncclFloat32, ncclSum, m.comm, m.stream));
    int64_t* b = to_device(std::vector<int64_t>{r == 2 ? 42 : 0});
    TRY(ncclBroadcast(b, b, 1, ncclInt64, 2, m.comm, m.stream));
    sync(m);
    if (to_host(in, 2) != std::vector<float>{float((r + n - 1) % n), 0.5f}) return failed(10, "ring");
    // Rank order: (1e8 + 0) + -1e8 = 0; 0.25 + 1.25 + 2.25 = 3.75.
    if (to_host(sum, 2) != std::vector<float>{0.0f, 3.75f}) return failed(11, "all-reduce");
    if (to_host(b, 1) != std::vector<int64_t>{42}) return failed(12, "broadcast");
    ncclComm_t half = nullptr;
    TRY(ncclCommSplit(m.comm, r % 2, 0, &half, nullptr));  // {0, 2} and {1}
    int size = 0;
    TRY(ncclCommCount(half, &size));
    int32_t* x = to_device(std::vector<int32_t>{r + 1});
    TRY(ncclAllReduce(x, x, 1, ncclInt32, ncclSum, half, m.stream));
    sync(m);
    if (size != (r % 2 == 0 ? 2 : 1) || to_host(x, 1)[0] != (r % 2 == 0 ? 4 : 2)) return failed(13, "split");
    TRY(ncclCommDestroy(half));
    TRY(ncclCommFinalize(m.comm));
    TRY(ncclCommDestroy(m.comm));
    return 0;
  }, 60, &id);
  CHECK(codes == std::vector<int>{0, 0, 0});
  // Everything the ranks made is gone: the last to leave removed the rendezvous directory.
  const std::string path = std::string(id.internal).substr(std::strlen("brigade-emulated-nccl "));
  CHECK(access(path.c_str(), F_OK) != 0);
}

TEST_CASE("emulated nccl: across processes a blocked receive waits until aborted", "[emulated_nccl]") {
  TimeLimit limit(90);
  const std::vector<int> codes = in_processes(2, [](int r, const ncclUniqueId& id) {
    Member m;
    m.device = r;
    if (cudaSetDevice(r) != cudaSuccess) return failed(9, "cudaSetDevice");
    TRY(ncclCommInitRank(&m.comm, 2, id, r));
    cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking);
    float* x = to_device(std::vector<float>(8, 0.0f));
    connect_both_ways(m, 1 - r, x);  // else the two receive-only first uses would fail the link setup
    // Both ranks receive first: a deadlock, but one this process cannot see whole.
    std::thread waiting([&] {
      ncclRecv(x, 8, ncclFloat32, 1 - r, m.comm, m.stream);
      cudaStreamSynchronize(m.stream);
    });
    if (r == 0) {
      std::this_thread::sleep_for(500ms);
      ncclResult_t state;
      ncclCommGetAsyncError(m.comm, &state);
      if (state != ncclSuccess) return failed(20, "rank 0 reported an error before the abort");
      ncclCommAbort(m.comm);
      waiting.join();
      const std::string text = ncclGetLastError(nullptr);
      if (text.find("it was waiting in ncclRecv from rank 1 (count 8, f32)") == std::string::npos)
        return failed(21, "rank 0's last error: " + text);
      return 0;
    }
    // Rank 1 learns that its peer aborted.
    const ncclResult_t state = wait_for_async_error(m.comm, 20s);
    const std::string text = ncclGetLastError(m.comm);
    ncclCommAbort(m.comm);
    waiting.join();
    if (state != ncclRemoteError) return failed(22, "rank 1's state " + std::to_string(int(state)));
    if (text.find("rank 0 called ncclCommAbort") == std::string::npos) return failed(23, "rank 1: " + text);
    return 0;
  });
  CHECK(codes == std::vector<int>{0, 0});
}

// ---- brigade's nccl backend (comm/nccl.cpp) on the emulated NCCL --------------------------------------

namespace {

using brigade::Device;
using brigade::DType;
using brigade::Tensor;
using brigade::comm::Communicator;
using brigade::comm::P2P;

std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).to_vector(); }

// The conversation of tests/gpu/test_gpu_comm.cpp, checked in place: "" or what was wrong.
std::string converse(Communicator& c) {
  const int n = c.size(), r = c.rank();
  const Device d = c.device();
  // The ring's links first: NCCL connects a link at its first use, and two ranks whose exchange sends
  // each other data would wait there for each other (comm/nccl.cpp, run_connect).
  std::vector<brigade::comm::Link> ring;
  for (int from = 0; from < n; ++from) ring.push_back({from, (from + 1) % n});
  c.connect(ring);
  std::vector<P2P> ops = {P2P::send(brigade::full({4, 3}, r, DType::f32, d), (r + 1) % n), P2P::recv((r + n - 1) % n)};
  c.exchange(ops);
  Tensor sum = brigade::full({100}, r + 1, DType::f32, d);
  c.all_reduce(sum);
  Tensor mean = brigade::full({10}, r, DType::bf16, d);
  c.all_reduce(mean, brigade::comm::ReduceOp::average);
  Tensor from_last = r == n - 1 ? brigade::full({5}, 42, DType::i64, d) : brigade::zeros({5}, DType::i64, d);
  c.broadcast(from_last, n - 1);
  c.barrier();
  auto alone = c.split(r);
  Tensor mine = brigade::full({2}, r, DType::f32, d);
  alone->all_reduce(mine);
  if (c.split(-1) != nullptr) return "split(-1) made a communicator";
  if (values(ops[1].tensor) != std::vector<double>(12, double((r + n - 1) % n))) return "exchange";
  if (values(sum) != std::vector<double>(100, n * (n + 1) / 2.0)) return "all_reduce";
  if (values(mean) != std::vector<double>(10, (n - 1) / 2.0)) return "average";
  if (values(from_last) != std::vector<double>(5, 42.0)) return "broadcast";
  if (values(mine) != std::vector<double>(2, double(r))) return "split";
  return "";
}

}  // namespace

TEST_CASE("emulated nccl: brigade's nccl_group on two emulated GPUs", "[emulated_nccl][brigade]") {
  TimeLimit limit(120);
  if (gpus() < 2) {
    WARN("one emulated GPU: run with BRIGADE_EMULATED_GPUS=2");
    return;
  }
  REQUIRE(brigade::comm::nccl_version() == NCCL_VERSION_CODE);
  auto comms = brigade::comm::nccl_group({Device::cuda(0), Device::cuda(1)});
  REQUIRE(comms.size() == 2);
  std::vector<std::string> errors = on_threads(2, [&](int r) {
    const std::string wrong = converse(*comms[size_t(r)]);
    if (!wrong.empty()) throw std::runtime_error(wrong);
  });
  REQUIRE(all_ok(errors));
  comms.clear();  // finalize and destroy
}

TEST_CASE("emulated nccl: brigade's nccl_communicator across processes through a file store",
          "[emulated_nccl][brigade]") {
  TimeLimit limit(120);
  char dir[] = "/tmp/brigade-nccl-store-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string store_dir = dir;
  const std::vector<int> codes = in_processes(2, [&](int r, const ncclUniqueId&) {
    std::shared_ptr<brigade::comm::Store> store = brigade::comm::make_file_store(store_dir);
    auto c = brigade::comm::nccl_communicator(store, r, 2, Device::cuda(r), 20s);
    const std::string wrong = converse(*c);
    return wrong.empty() ? 0 : failed(30, "rank " + std::to_string(r) + ": " + wrong);
  });
  CHECK(codes == std::vector<int>{0, 0});
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);
}

TEST_CASE("emulated nccl: brigade's watchdog aborts a send nobody receives", "[emulated_nccl][brigade]") {
  TimeLimit limit(120);
  if (streams_run_inline()) {
    WARN("the emulator runs stream work on the issuing thread: a stuck send would block it for good");
    return;
  }
  char dir[] = "/tmp/brigade-nccl-store-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string store_dir = dir;
  const std::vector<int> codes = in_processes(2, [&](int r, const ncclUniqueId&) {
    std::shared_ptr<brigade::comm::Store> store = brigade::comm::make_file_store(store_dir);
    auto c = brigade::comm::nccl_communicator(store, r, 2, Device::cuda(r), 20s);
    c->connect({{0, 1}});  // so that the send is queued at once (a first use would wait for rank 1's receive)
    c->set_timeout(500ms);
    if (r == 1) {
      std::this_thread::sleep_for(3s);  // never receives
      return 0;
    }
    c->send(brigade::ones({16}, DType::f32, Device::cuda(0)), 1);  // queued; returns at once
    const auto start = std::chrono::steady_clock::now();
    while (!c->aborted() && std::chrono::steady_clock::now() - start < 10s) std::this_thread::sleep_for(10ms);
    if (!c->aborted()) return failed(40, "the watchdog did not abort");
    try {
      c->send(brigade::ones({16}, DType::f32, Device::cuda(0)), 1);
    } catch (const std::exception& e) {
      const std::string text = e.what();
      if (text.find("comm send to rank 1") == std::string::npos) return failed(41, "the error: " + text);
      return 0;
    }
    return failed(42, "a send on an aborted communicator went through");
  });
  CHECK(codes == std::vector<int>{0, 0});
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);
}
