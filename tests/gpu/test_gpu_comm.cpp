// comm/ on GPUs: NCCL (a rank sending to itself — the one transfer a single GPU can do — plus
// several ranks per GPU where the library allows it, and several GPUs where there are some) and
// the local backend's event hand-over. Run by tests/gpu_main.cpp, which skips without a GPU.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <thread>

#include "brigade.h"
#include "kernels/ops.h"
#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "core/stream.h"
#include "pipeline/schedule.h"
#include "pipeline/exchange.h"
#include "../pipeline_step.h"
#include "../skip_model.h"

using namespace brigade;
using test::all_ok;
using comm::P2P;
using comm::Shapes;
using Catch::Contains;

namespace {

const Device kGpu = Device::cuda(0);

Tensor host_random(const Shape& shape, uint64_t seed, DType dtype) {
  Generator gen(seed);
  return ops::to_dtype(randn(shape, DType::f64, Device::cpu(), &gen), dtype);
}

// Bitwise equality through the host.
void require_same(const Tensor& got, const Tensor& expected) {
  REQUIRE(got.shape() == expected.shape());
  REQUIRE(got.dtype() == expected.dtype());
  REQUIRE(got.to(Device::cpu()).to_vector() == expected.to(Device::cpu()).to_vector());
}

// The same conversation every multi-rank test holds: point to point, collectives, a split.
void converse(comm::Communicator& c, std::vector<Tensor>& results) {
  int n = c.size(), next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
  Device d = c.device();
  // The ring's links first: on NCCL a link connects at its first use, where two ranks whose exchange
  // sends each other data would wait for each other (comm/nccl.cpp, run_connect).
  std::vector<comm::Link> ring;
  for (int from = 0; from < n; ++from) ring.push_back({from, (from + 1) % n});
  c.connect(ring);
  std::vector<P2P> ops = {P2P::send(full({64, 3}, c.rank(), DType::f32, d), next),
                          P2P::recv(prev)};
  c.exchange(ops);
  Tensor sum = full({1000}, c.rank() + 1, DType::f32, d);
  c.all_reduce(sum);
  Tensor mean = full({10}, c.rank(), DType::bf16, d);
  c.all_reduce(mean, comm::ReduceOp::average);
  Tensor from_last = c.rank() == n - 1 ? full({5}, 42, DType::i64, d) : zeros({5}, DType::i64, d);
  c.broadcast(from_last, n - 1);
  c.barrier();
  auto alone = c.split(c.rank());  // one group per rank
  Tensor mine = full({2}, c.rank(), DType::f32, d);
  alone->all_reduce(mine);
  results = {ops[1].tensor, sum, mean, from_last, mine};
}

void check_conversation(const std::vector<std::vector<Tensor>>& results) {
  int n = int(results.size());
  for (int r = 0; r < n; ++r) {
    const std::vector<Tensor>& got = results[size_t(r)];
    require_same(got[0], full({64, 3}, (r + n - 1) % n, DType::f32));
    require_same(got[1], full({1000}, n * (n + 1) / 2, DType::f32));
    require_same(got[2], ops::to_dtype(full({10}, (n - 1) / 2.0, DType::f32), DType::bf16));
    require_same(got[3], full({5}, 42, DType::i64));
    require_same(got[4], full({2}, r, DType::f32));
  }
}

}  // namespace

TEST_CASE("gpu comm: nccl sends to itself within one group", "[gpu][comm][nccl]") {
  INFO("NCCL " << comm::nccl_version());
  auto comms = comm::nccl_group({kGpu});
  comm::Communicator& c = *comms[0];
  REQUIRE(c.backend() == "nccl");
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64, DType::i32, DType::i64}) {
    Tensor x = host_random({17, 33}, 3, dtype).to(kGpu);
    int tag = int(dtype);
    // First message on the channel: with a header. Second: data only (fixed shape).
    for (int round = 0; round < 2; ++round) {
      std::vector<P2P> ops = {P2P::send(x, 0, tag), P2P::recv(0, tag)};
      c.exchange(ops);
      REQUIRE(ops[1].tensor.device() == kGpu);
      require_same(ops[1].tensor, x);
    }
  }
  // Into an existing, non-contiguous destination.
  Tensor x = host_random({8, 6}, 4, DType::f32).to(kGpu);
  Tensor wide = zeros({8, 12}, DType::f32, kGpu);
  Tensor view = wide.slice(1, 0, 12, 2);
  std::vector<P2P> ops = {P2P::send(x, 0, 100), P2P::recv_into(view, 0, 100)};
  c.exchange(ops);
  require_same(view, x);
  // Varying shapes: a header with every message.
  for (int64_t rows = 1; rows <= 3; ++rows) {
    Tensor y = full({rows, 4}, double(rows), DType::f32, kGpu);
    std::vector<P2P> v = {P2P::send(y, 0, 200, Shapes::varying), P2P::recv(0, 200, Shapes::varying)};
    c.exchange(v);
    require_same(v[1].tensor, y);
  }
  // Empty tensors move nothing but still shake hands.
  std::vector<P2P> empty_ops = {P2P::send(zeros({0, 5}, DType::f32, kGpu), 0, 300), P2P::recv(0, 300)};
  c.exchange(empty_ops);
  REQUIRE(empty_ops[1].tensor.shape() == Shape{0, 5});
}

TEST_CASE("gpu comm: nccl transfers are ordered after the caller's stream", "[gpu][comm][nccl]") {
  auto comms = comm::nccl_group({kGpu});
  Stream compute = Stream::create(kGpu);
  StreamGuard guard(compute);
  for (int i = 0; i < 5; ++i) {
    // A kernel on the current stream produces x; the send is queued right behind it, no host sync.
    Tensor big = full({1 << 22}, double(i), DType::f32, kGpu);
    Tensor x = ops::scale_shift(big, 2.0, 1.0);
    std::vector<P2P> ops = {P2P::send(x, 0, 0), P2P::recv(0, 0)};
    comms[0]->exchange(ops);
    // ...and a kernel queued after the receive sees the received data.
    Tensor doubled = ops::scale_shift(ops[1].tensor, 2.0, 0.0);
    require_same(doubled, full({1 << 22}, 2.0 * (2.0 * i + 1), DType::f32));
  }
}

TEST_CASE("gpu comm: nccl collectives and split on one rank", "[gpu][comm][nccl]") {
  auto comms = comm::nccl_group({kGpu});
  comm::Communicator& c = *comms[0];
  Tensor x = host_random({123}, 5, DType::f32).to(kGpu);
  Tensor y = ops::clone(x);
  c.all_reduce(y);
  require_same(y, x);
  c.all_reduce(y, comm::ReduceOp::average);
  require_same(y, x);
  c.broadcast(y, 0);
  require_same(y, x);
  c.barrier();
  REQUIRE(c.split(-1) == nullptr);
  auto child = c.split(7);
  REQUIRE(child->size() == 1);
  child->all_reduce(y);
  require_same(y, x);
}

TEST_CASE("gpu comm: nccl through the rendezvous store", "[gpu][comm][nccl]") {
  std::shared_ptr<comm::Store> store = comm::make_memory_store();
  auto c = comm::nccl_communicator(store, 0, 1, kGpu);
  Tensor x = full({4}, 3, DType::f32, kGpu);
  std::vector<P2P> ops = {P2P::send(x, 0), P2P::recv(0)};
  c->exchange(ops);
  require_same(ops[1].tensor, x);
  // connect() with the process environment of a single process: the same, via a memory store.
  comm::ConnectOptions options;
  options.device = kGpu;
  auto joined = comm::connect(options);
  REQUIRE(joined->backend() == "nccl");
}

TEST_CASE("gpu comm: nccl errors name the op; a hung receive is aborted at its deadline", "[gpu][comm][nccl]") {
  using namespace std::chrono_literals;
  SECTION("a header that never comes times out on the host") {
    auto comms = comm::nccl_group({kGpu}, 500ms);
    auto start = std::chrono::steady_clock::now();
    // NCCL may also refuse a lone receive from itself outright; either way the call must end
    // promptly with an error naming it.
    REQUIRE_THROWS_WITH(comms[0]->recv(0, 9), Contains("comm recv from rank 0, tag 9 (rank 0 of 1, nccl)"));
    REQUIRE(std::chrono::steady_clock::now() - start < 10s);
    REQUIRE(comms[0]->aborted());
    device_synchronize(kGpu);  // the aborted communicator left nothing running
  }
  SECTION("data that never comes: the watchdog aborts the communicator") {
    auto comms = comm::nccl_group({kGpu}, 500ms);
    Tensor x = ones({16}, DType::f32, kGpu);
    std::vector<P2P> ops = {P2P::send(x, 0), P2P::recv(0)};
    comms[0]->exchange(ops);  // establishes the fixed channel: later receives carry no header
    try {
      comms[0]->recv_into(zeros({16}, DType::f32, kGpu), 0);  // queued on the GPU; returns at once
    } catch (const Error& e) {
      WARN("NCCL refused a lone receive from itself at once: " << e.what());
    }
    auto start = std::chrono::steady_clock::now();
    while (!comms[0]->aborted() && std::chrono::steady_clock::now() - start < 10s)
      std::this_thread::sleep_for(10ms);
    REQUIRE(comms[0]->aborted());
    REQUIRE_THROWS_WITH(comms[0]->send(x, 0), Contains("aborted earlier"));
    device_synchronize(kGpu);  // ncclCommAbort ended the waiting kernel
  }
  SECTION("mismatches and wrong devices") {
    auto comms = comm::nccl_group({kGpu});
    REQUIRE_THROWS_WITH(comms[0]->send(ones({2}), 0),
                        Contains("the tensor is on cpu but this communicator moves cuda:0"));
    std::vector<P2P> ops = {P2P::send(ones({2, 8}, DType::f32, kGpu), 0, 4),
                            P2P::recv_into(zeros({2, 4}, DType::f32, kGpu), 0, 4)};
    REQUIRE_THROWS_WITH(comms[0]->exchange(ops),
                        Contains("rank 0 sent [2, 8] f32 but this receive expects [2, 4] f32"));
  }
}

TEST_CASE("gpu comm: several ranks on one GPU (NCCL >= 2.30.3)", "[gpu][comm][nccl]") {
  if (!comm::nccl_multi_rank_per_gpu()) {
    WARN("NCCL " << comm::nccl_version() << " < 2.30.3: several ranks per GPU unsupported; checking the refusal");
    REQUIRE_THROWS_WITH(comm::nccl_group({kGpu, kGpu}), Contains("need NCCL >= 2.30.3"));
    return;
  }
  auto comms = comm::nccl_group({kGpu, kGpu, kGpu});
  std::vector<std::vector<Tensor>> results(comms.size());
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) { converse(c, results[size_t(c.rank())]); });
  REQUIRE(all_ok(errors));
  check_conversation(results);
}

TEST_CASE("gpu comm: one rank per GPU in one process", "[gpu][comm][nccl]") {
  int gpus = cuda_device_count();
  if (gpus < 2) {
    WARN("one GPU: skipping the multi-GPU nccl group");
    return;
  }
  std::vector<Device> devices;
  for (int i = 0; i < gpus; ++i) devices.push_back(Device::cuda(i));
  auto comms = comm::nccl_group(devices);
  std::vector<std::vector<Tensor>> results(comms.size());
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) { converse(c, results[size_t(c.rank())]); });
  REQUIRE(all_ok(errors));
  check_conversation(results);
}

TEST_CASE("gpu comm: an nccl send leaves the caller's stream free; a receive does not", "[gpu][comm][nccl]") {
  // Rank 1 posts its receive only once rank 0's stream has finished the work it queued after its send
  // (the send runs on the communicator's stream), or after 30 s if that never happens — then the
  // check fails instead of hanging. Rank 1's stream must not pass its receive before the data is in.
  const int gpus = cuda_device_count();
  if (gpus < 2 && !comm::nccl_multi_rank_per_gpu()) {
    WARN("one GPU and NCCL " << comm::nccl_version() << " < 2.30.3: no two-rank NCCL group");
    return;
  }
  auto comms = comm::nccl_group({Device::cuda(0), Device::cuda(1 % gpus)});
  // Connected first: at a first use, rank 0's send would wait in NCCL's link setup for rank 1's receive.
  REQUIRE(all_ok(test::run_ranks(comms, [](comm::Communicator& c) { c.connect({{0, 1}}); })));
  std::atomic<bool> posted{false}, sender_done{false};
  bool done_before_receiver = false;
  std::vector<double> received, computed;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    Stream stream = Stream::create(c.device());
    StreamGuard on(stream);
    if (c.rank() == 0) {
      Tensor x = full({1000}, 3.0, DType::f32, c.device());
      c.send(x, 1);
      Tensor after = ops::scale_shift(x, 2.0, 1.0);  // reads x, as NCCL does: allowed
      Event queued = Event::create(c.device());
      queued.record(stream);
      queued.synchronize();
      done_before_receiver = !posted.load();
      sender_done = true;
      computed = after.to_vector();
    } else {
      for (int waited = 0; !sender_done && waited < 30000; ++waited)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      posted = true;
      Tensor got = c.recv(0);
      received = ops::scale_shift(got, 1.0, 1.0).to_vector();  // ordered after the receive
    }
  });
  REQUIRE(all_ok(errors));
  CHECK(done_before_receiver);
  REQUIRE(computed.size() == 1000);
  CHECK(computed[999] == 7.0);
  REQUIRE(received.size() == 1000);
  CHECK(received[0] == 4.0);
  CHECK(received[999] == 4.0);
}

namespace {

// How many NCCL ranks this machine can hold: one per GPU, or up to 4 on one GPU where NCCL allows it.
int most_nccl_ranks() {
  const int gpus = cuda_device_count();
  return comm::nccl_multi_rank_per_gpu() ? 4 : std::min(gpus, 4);
}

// One pipeline step of `c` on NCCL ranks must equal the same step on local threads, bit for bit:
// the same kernels in the same order. Ranks on distinct GPUs where there are enough, or sharing one.
// A transport that hangs fails here, once the communicators' 60 s timeout aborts them.
void check_nccl_like_local(const test::GridPoint& c, bool varying) {
  const int gpus = cuda_device_count();
  std::vector<Device> devices;
  for (int r = 0; r < c.P; ++r) devices.push_back(Device::cuda(r % gpus));
  auto nccl = comm::nccl_group(devices, std::chrono::seconds(60));
  const test::StepResult got = test::pipeline_step(nccl, c.kind, c.M, c.V, varying);
  auto local = comm::local_group(devices);
  const test::StepResult want = test::pipeline_step(local, c.kind, c.M, c.V, varying);
  for (const std::string& e : want.errors) REQUIRE(e.empty());
  for (size_t r = 0; r < got.errors.size(); ++r) {
    INFO("rank " << r << ": " << got.errors[r]);
    REQUIRE(got.errors[r].empty());
  }
  REQUIRE(got.losses == want.losses);
  REQUIRE(got.grads == want.grads);
}

}  // namespace

TEST_CASE("gpu comm: every schedule runs on NCCL ranks as on local threads, bit for bit", "[gpu][comm][nccl][pipeline]") {
  // The NCCL transport against the local one, both on GPUs with a stream per rank. NCCL matches a
  // pair's sends and receives by order, and its sends may wait for their receivers: a schedule whose
  // exchanges wait on each other would hang here — none does, varying shapes included (headers
  // travel apart, and an exchange's sends go out before it waits for any).
  const int most = most_nccl_ranks();
  if (most < 2) {
    WARN("one GPU and NCCL " << comm::nccl_version() << " < 2.30.3: no multi-rank NCCL pipeline to run");
    return;
  }
  for (const test::GridPoint& c : test::schedule_grid(most)) {
    for (bool varying : {false, true}) {
      DYNAMIC_SECTION(pipeline::schedule_name(c.kind) << " P=" << c.P << " M=" << c.M << " V=" << c.V
                                                      << (varying ? " varying" : " fixed")) {
        check_nccl_like_local(c, varying);
      }
    }
  }
}

TEST_CASE("gpu comm: a V with 1 to 2P micro-batches runs on NCCL as on local threads", "[gpu][comm][nccl][pipeline]") {
  // zb-v with M = 1 on 3-4 ranks hung here while NCCL's exchange issued its sends only after its
  // incoming headers (docs/pipeline.md, "A V with few micro-batches on NCCL"): stage 0 is empty (5
  // layers on 2P stages), the embedding on rank 1 reads the ids it received on the host, and rank 0
  // held them until a header came that rank 1 sends later. The sends now go first; and real NCCL's
  // first-use link setup, which the emulator models, would still wait in a cycle below 2P, so
  // the executor connects every link up front (the next test shows that this is what makes it run).
  // Every M from 1 to 2P, fixed and varying shapes; dualpipev needs M >= 2P, so it runs at 2P.
  const int most = most_nccl_ranks();
  if (most < 2) {
    WARN("one GPU and NCCL " << comm::nccl_version() << " < 2.30.3: no multi-rank NCCL pipeline to run");
    return;
  }
  std::vector<test::GridPoint> grid;
  for (int P = 2; P <= most; ++P) {
    for (int M = 1; M <= 2 * P; ++M) grid.push_back({pipeline::ScheduleKind::zb_v, P, M, 2});
    grid.push_back({pipeline::ScheduleKind::dualpipev, P, 2 * P, 2});
  }
  for (const test::GridPoint& c : grid) {
    for (bool varying : {false, true}) {
      DYNAMIC_SECTION(pipeline::schedule_name(c.kind) << " P=" << c.P << " M=" << c.M
                                                      << (varying ? " varying" : " fixed")) {
        check_nccl_like_local(c, varying);
      }
    }
  }
}

TEST_CASE("gpu comm: without its links connected first, a V with one micro-batch waits on NCCL",
          "[gpu][comm][nccl][pipeline]") {
  // zb-v, P = 3, M = 1, run by an executor told not to connect the links first
  // (ExecutorOptions::connect_links = false). At first use NCCL sets a link up inside the group and
  // the host waits there for the peer's group on the mirror direction (NCCL's source,
  // src/transport.cc; the emulated NCCL models it): rank 0's first header group needs rank 1's,
  // which rank 1 issues only after two forwards that wait for rank 0. It must end with an error
  // (the communicators are aborted), not hang. Through Pipeline, whose executor connects every link
  // first, the same step runs as on local threads. On a GPU this should behave the same, since it is
  // NCCL's own setup that waits — but only the model predicts it (one reading of NCCL's source;
  // were links connected at init, this would run), so the failure is required only on the
  // emulator, and a GPU run reports what it saw.
  const int gpus = cuda_device_count();
  if (most_nccl_ranks() < 3) {
    WARN("fewer than 3 NCCL ranks on this machine: skipping");
    return;
  }
  const int P = 3, M = 1;
  const pipeline::Schedule schedule = pipeline::make_schedule(pipeline::ScheduleKind::zb_v, P, M, 2);
  const pipeline::Partition partition = pipeline::partition_uniform(5, 2 * P);
  std::vector<Device> devices;
  for (int r = 0; r < P; ++r) devices.push_back(Device::cuda(r % gpus));
  auto nccl = comm::nccl_group(devices, std::chrono::seconds(2));
  const auto start = std::chrono::steady_clock::now();
  auto errors = test::run_ranks(nccl, [&](comm::Communicator& c) {
    Stream stream = Stream::create(c.device());
    StreamGuard on(stream);
    nn::GPTConfig config = test::tiny_gpt_config();
    config.device = c.device();
    nn::GPT model(config);
    pipeline::GptStages mine = pipeline::gpt_stages(model, partition, schedule.layout, c.rank());
    Generator gen(100);
    Tensor ids = ops::to_dtype(uniform({2, 6}, 0, 10.999, DType::f64, Device::cpu(), &gen), DType::i64).to(c.device());
    pipeline::ExecutorOptions options;
    options.connect_links = false;
    pipeline::Executor executor(c, schedule, mine.chunks, mine.loss, options);
    executor.run({ids}, {ids}, 1.0 / M);
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
  bool timed_out = false, deadlock = false;
  size_t failed = 0;
  for (const std::string& e : errors) {
    failed += e.empty() ? 0 : 1;
    timed_out = timed_out || e.find("timed out") != std::string::npos;
    deadlock = deadlock || (e.find("deadlock") != std::string::npos && e.find("link setup") != std::string::npos);
  }
#ifdef BRIGADE_CUDA_EMULATOR
  // Every rank waits in a setup for a rank in a setup, all in this process: the emulated NCCL names
  // the deadlock at once, and the watchdog aborts on it (a GPU would wait until the deadline).
  for (size_t r = 0; r < errors.size(); ++r) UNSCOPED_INFO("rank " << r << ": " << errors[r]);
  CHECK(failed == errors.size());  // no rank finishes its step
  CHECK(deadlock);
#else
  // Real NCCL: the model's prediction, checked rather than required.
  WARN("without connect, zb-v P=3 M=1 on NCCL: " << failed << " of " << P << " ranks failed"
                                                 << (timed_out ? ", with a timeout" : "")
                                                 << (failed == 0 ? " — it ran: the first-use model is wrong here" : ""));
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) WARN("rank " << r << ": " << errors[r]);
#endif
  check_nccl_like_local({pipeline::ScheduleKind::zb_v, P, M, 2}, false);
}

TEST_CASE("gpu comm: collectives connected first stay asynchronous; at first use they wait on the host",
          "[gpu][comm][nccl][connect]") {
  // Two ranks, two communicators X and Y; each rank starts an all-reduce on both, rank 0 on X first,
  // rank 1 on Y first, then waits for both. Asynchronous calls on separate communicators (and
  // streams) may go in any order — once connected. At a collective's first use NCCL connects its
  // algorithm inside ncclGroupEnd and the host waits there until the peer's group reaches it (NCCL's
  // source, src/group.cc; the emulated NCCL models it): rank 0 waits in X for rank 1, which waits in
  // Y for rank 0 — across two communicators, so no one communicator sees a deadlock, and it ends at
  // the deadline with an error. Connected first (Communicator::connect_collectives, the same list
  // on both ranks, X then Y), the same calls run and sum.
  const int gpus = cuda_device_count();
  if (most_nccl_ranks() < 2) {
    WARN("fewer than 2 NCCL ranks on this machine: skipping");
    return;
  }
  const std::vector<Device> devices = {Device::cuda(0), Device::cuda(1 % gpus)};
  const int64_t n = 6;
  auto run = [&](bool connect_first, std::vector<std::vector<double>>* sums) {
    auto x = comm::nccl_group(devices, std::chrono::seconds(2));
    auto y = comm::nccl_group(devices, std::chrono::seconds(2));
    sums->assign(2, {});
    return test::run_ranks(x, [&](comm::Communicator& cx) {
      const int r = cx.rank();
      comm::Communicator& cy = *y[size_t(r)];
      const comm::CollectiveUse use = comm::CollectiveUse::all_reduce(n, DType::f32, comm::ReduceOp::sum);
      if (connect_first) {
        cx.connect_collectives({use});
        cy.connect_collectives({use});
      }
      Tensor a = full({n}, 1 + r, DType::f32, cx.device()), b = full({n}, 10 * (1 + r), DType::f32, cx.device());
      comm::Communicator::PendingReduce first, second;
      if (r == 0) {
        first = cx.all_reduce_async(a);
        second = cy.all_reduce_async(b);
      } else {
        first = cy.all_reduce_async(b);
        second = cx.all_reduce_async(a);
      }
      first.wait();
      second.wait();
      (*sums)[size_t(r)] = ops::concat({a, b}, 0).to(Device::cpu()).to_vector();
    });
  };
  std::vector<std::vector<double>> sums;
  SECTION("connected first: the two orders run") {
    auto errors = run(true, &sums);
    REQUIRE(all_ok(errors));
    std::vector<double> want(size_t(n), 1.0 + 2.0);
    want.insert(want.end(), size_t(n), 10.0 + 20.0);
    for (const auto& got : sums) CHECK(got == want);
  }
  SECTION("not connected: the first uses wait on each other until the deadline") {
    const auto start = std::chrono::steady_clock::now();
    auto errors = run(false, &sums);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(60));
    size_t timed_out = 0;
    for (const std::string& e : errors) timed_out += e.find("timed out") != std::string::npos ? 1 : 0;
#ifdef BRIGADE_CUDA_EMULATOR
    for (size_t r = 0; r < errors.size(); ++r) UNSCOPED_INFO("rank " << r << ": " << errors[r]);
    CHECK(timed_out == errors.size());
#else
    // Real NCCL: the model's prediction, checked rather than required.
    WARN("collectives started in opposite orders without connect_collectives on NCCL: " << timed_out << " of 2 ranks timed out"
         << (timed_out == 0 ? " — they ran: the first-use model of collectives is wrong here" : ""));
    for (size_t r = 0; r < errors.size(); ++r)
      if (!errors[r].empty()) WARN("rank " << r << ": " << errors[r]);
#endif
  }
}

TEST_CASE("gpu comm: skip connections on NCCL ranks equal local threads bit for bit", "[gpu][comm][nccl][pipeline]") {
  // The skip's tensor travels in the same bundle as the activation, through the stages between,
  // with a header of its own when shapes vary (tests/skip_model.h: layer 1 stashes, layer 3 pops).
  const int gpus = cuda_device_count();
  struct Config {
    pipeline::ScheduleKind kind;
    int P, V;
    std::vector<int64_t> bounds;
  };
  const int M = 4;
  for (const Config& c : {Config{pipeline::ScheduleKind::one_f_one_b, 4, 1, {0, 1, 2, 3, 5}},
                          Config{pipeline::ScheduleKind::zb_h1, 3, 1, {0, 2, 3, 5}},
                          Config{pipeline::ScheduleKind::interleaved, 2, 2, {0, 1, 2, 4, 5}}}) {
    if (c.P > gpus && !comm::nccl_multi_rank_per_gpu()) {
      WARN(gpus << " GPU(s) and NCCL " << comm::nccl_version() << " < 2.30.3: skipping P=" << c.P);
      continue;
    }
    for (bool varying : {false, true}) {
      DYNAMIC_SECTION(pipeline::schedule_name(c.kind) << " P=" << c.P << " V=" << c.V
                                                      << (varying ? " varying" : " fixed")) {
        std::vector<Tensor> inputs, targets;
        for (int m = 0; m < M; ++m) {
          const int64_t rows = varying ? 2 + m % 3 : 3;
          Generator gen(uint64_t(60 + m));
          inputs.push_back(randn({rows, 4}, DType::f32, Device::cpu(), &gen));
          targets.push_back(randn({rows, 3}, DType::f32, Device::cpu(), &gen));
        }
        pipeline::Partition partition;
        partition.bounds = c.bounds;
        const pipeline::Schedule schedule = pipeline::make_schedule(c.kind, c.P, M, c.V);
        const int from = int(partition.stage_of_layer(1)), to = int(partition.stage_of_layer(3));
        std::vector<Device> devices;
        for (int r = 0; r < c.P; ++r) devices.push_back(Device::cuda(r % gpus));
        // Every layer's weight gradients, by layer, from the rank that holds it.
        auto step = [&](std::vector<std::unique_ptr<comm::Communicator>>& comms) {
          std::vector<std::vector<double>> grads(10);
          std::mutex mutex;
          auto errors = test::run_ranks(comms, [&](comm::Communicator& comm) {
            Stream stream = Stream::create(comm.device());
            StreamGuard on(stream);
            pipeline::Layers layers = test::skip_model(comm.device());
            pipeline::PipelineGroups groups;
            groups.pipeline = &comm;
            pipeline::PipelineOptions options;
            options.skips = {{"early", from, to}};
            options.variable_shapes = varying;
            pipeline::Pipeline pipe(groups, schedule,
                                    pipeline::rank_chunks(layers, partition, schedule.layout, comm.rank()), test::mse,
                                    options);
            std::vector<Tensor> mine_in, mine_out;
            for (int m = 0; m < M; ++m) {
              mine_in.push_back(inputs[size_t(m)].to(comm.device()));
              mine_out.push_back(targets[size_t(m)].to(comm.device()));
            }
            pipe.forward_backward(mine_in, mine_out);
            std::lock_guard<std::mutex> lock(mutex);
            for (int64_t l = 0; l < 5; ++l) {
              if (schedule.layout.rank_of(int(partition.stage_of_layer(l))) != comm.rank()) continue;
              auto* fc = dynamic_cast<nn::Linear*>(layers[size_t(l)]->named_children()[0].second.get());
              grads[size_t(2 * l)] = fc->weight.grad().to_vector();
              grads[size_t(2 * l + 1)] = fc->bias.grad().to_vector();
            }
          });
          for (size_t r = 0; r < errors.size(); ++r) {
            INFO("rank " << r << ": " << errors[r]);
            REQUIRE(errors[r].empty());
          }
          return grads;
        };
        auto local = comm::local_group(devices);
        const auto want = step(local);
        auto nccl = comm::nccl_group(devices, std::chrono::seconds(60));
        const auto got = step(nccl);
        for (size_t i = 0; i < want.size(); ++i) {
          INFO("layer " << i / 2 << (i % 2 ? " bias" : " weight"));
          REQUIRE(!want[i].empty());
          REQUIRE(got[i] == want[i]);
        }
      }
    }
  }
}

TEST_CASE("gpu comm: data parallelism on NCCL overlaps the backward and equals local threads bit for bit",
          "[gpu][comm][nccl][pipeline][dp]") {
  // 2 replicas x 2 stages. Each chunk's gradient buckets start their all-reduce as soon as the chunk's
  // last backward has run (pipeline/replica_buckets.h), on the replica communicator's stream, while
  // the rank goes on; the step's result must not depend on it: overlapped, at the end of the step,
  // and on the local transport (which reduces at the end), the same bits.
  const int gpus = cuda_device_count();
  if (gpus < 4 && !comm::nccl_multi_rank_per_gpu()) {
    WARN(gpus << " GPU(s) and NCCL " << comm::nccl_version() << " < 2.30.3: no 4-rank NCCL job to run");
    return;
  }
  const std::vector<test::GridPoint> points = {{pipeline::ScheduleKind::one_f_one_b, 2, 3, 1},
                                               {pipeline::ScheduleKind::gpipe, 2, 2, 1},
                                               {pipeline::ScheduleKind::zb_h1, 2, 3, 1},
                                               {pipeline::ScheduleKind::interleaved, 2, 2, 2}};
  for (const test::GridPoint& c : points) {
    for (bool varying : {false, true}) {
      DYNAMIC_SECTION(pipeline::schedule_name(c.kind) << " P=2 M=" << c.M << " V=" << c.V << " DP=2"
                                                      << (varying ? " varying" : " fixed")) {
        std::vector<Device> devices;
        for (int r = 0; r < 4; ++r) devices.push_back(Device::cuda(r % gpus));
        auto local = comm::local_group(devices);
        const test::StepResult want = test::pipeline_step(local, c.kind, c.M, c.V, varying, 2);
        for (const std::string& e : want.errors) REQUIRE(e.empty());
        for (int n : want.reductions_during_backward) CHECK(n == 0);  // local: at the end of the step
        for (bool overlap : {true, false}) {
          INFO((overlap ? "overlapped" : "at the end of the step"));
          auto nccl = comm::nccl_group(devices, std::chrono::seconds(60));
          const test::StepResult got = test::pipeline_step(nccl, c.kind, c.M, c.V, varying, 2, overlap);
          for (size_t r = 0; r < got.errors.size(); ++r) {
            INFO("rank " << r << ": " << got.errors[r]);
            REQUIRE(got.errors[r].empty());
          }
          REQUIRE(got.losses == want.losses);
          REQUIRE(got.grads == want.grads);
          for (size_t r = 0; r < got.reductions.size(); ++r) {
            INFO("rank " << r);
            CHECK(got.reductions[r] == want.reductions[r]);
            CHECK(got.reductions[r] > 1);
            // Overlapped: every untied gradient's bucket started inside the step; the tied
            // embedding (summed across stages first) is the only one left for the end.
            if (overlap) CHECK(got.reductions_during_backward[r] >= got.reductions[r] - 1);
            else CHECK(got.reductions_during_backward[r] == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("gpu comm: the local backend hands GPU tensors over with an event", "[gpu][comm][local]") {
  auto comms = comm::local_group(2, kGpu);
  std::vector<Tensor> sent(2), received(2);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    // Each thread works on its own stream: the hand-over must order the receiver after the sender.
    Stream mine = Stream::create(kGpu);
    StreamGuard guard(mine);
    if (c.rank() == 0) {
      for (int i = 0; i < 4; ++i) {
        Tensor big = full({1 << 22}, double(i), DType::f32, kGpu);
        sent[0] = ops::scale_shift(ops::scale_shift(big, 3.0, 1.0), 1.0, 0.0);  // queued, not finished
        c.send(sent[0], 1);
      }
    } else {
      for (int i = 0; i < 4; ++i) {
        Tensor got = c.recv(0);
        Tensor back = ops::scale_shift(got, 1.0, 0.0);  // reads it on this thread's stream
        Tensor host = back.to(Device::cpu());
        if (host.to_vector()[size_t(1 << 21)] != 3.0 * i + 1) throw std::runtime_error("read before it was written");
        received[1] = got;
      }
    }
  });
  REQUIRE(all_ok(errors));
  REQUIRE(received[1].storage().same_as(sent[0].storage()));  // no copy on one GPU
  std::vector<Tensor> sums(2);
  errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    sums[size_t(c.rank())] = full({100}, c.rank() + 1, DType::bf16, kGpu);
    c.all_reduce(sums[size_t(c.rank())]);
  });
  REQUIRE(all_ok(errors));
  for (const Tensor& s : sums) require_same(s, full({100}, 3, DType::bf16));
}

TEST_CASE("gpu comm: the local backend between two GPUs copies", "[gpu][comm][local]") {
  if (cuda_device_count() < 2) {
    WARN("one GPU: skipping the cross-GPU hand-over");
    return;
  }
  auto comms = comm::local_group({Device::cuda(0), Device::cuda(1)});
  Tensor x = host_random({50}, 8, DType::f32).to(Device::cuda(0));
  comms[0]->send(x, 1);
  Tensor got = comms[1]->recv(0);
  REQUIRE(got.device() == Device::cuda(1));
  require_same(got, x);
}
