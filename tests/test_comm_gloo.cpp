// The gloo backend. First across real processes, started by `brigade launch` on loopback: each
// scenario runs tests/comm/comm_worker, which checks its own results; here we check exit statuses,
// the ranks' (prefixed) messages, and that failures end in bounded time. Then ranks as threads of
// this process, where Catch can look at the tensors directly.
#include <catch2/catch.hpp>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "brigade.h"
#include "comm/comm.h"
#include "comm/background.h"
#include "comm/run_command.h"
#include "comm/thread_ranks.h"
#include "pipeline_step.h"

using namespace brigade;
using Catch::Contains;
using comm::P2P;

namespace {

test::CommandResult launch(const std::string& flags, const std::string& scenario) {
  return test::run_command(std::string(BRIGADE_CLI) + " launch " + flags + " -- " + COMM_WORKER + " " + scenario);
}

// `scenario` under `brigade launch flags` succeeds: status 0, and each of the `ranks` ranks says
// "<scenario> ok" (comm_worker checks the results itself).
void require_every_rank_ok(const std::string& flags, const std::string& scenario, int ranks) {
  test::CommandResult r = launch(flags, scenario);
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE(test::count(r.output, "] " + scenario + " ok") == ranks);
}

}  // namespace

TEST_CASE("gloo: a ring of grouped sends and receives", "[comm][gloo]") {
  require_every_rank_ok("-n 4 --timeout 20", "ring", 4);
  // The same over the TCP store instead of a store directory.
  require_every_rank_ok("-n 3 --store tcp --timeout 20", "ring", 3);
}

TEST_CASE("gloo: a 4-stage pipeline exchanges activations and gradients", "[comm][gloo]") {
  require_every_rank_ok("-n 4 --timeout 20", "pipeline", 4);
}

TEST_CASE("gloo: all-reduce, broadcast, barrier and split match a reference", "[comm][gloo]") {
  require_every_rank_ok("-n 4 --timeout 20", "collectives", 4);
}

TEST_CASE("gloo: a shape mismatch names both sides, the peer and the tag", "[comm][gloo]") {
  test::CommandResult r = launch("-n 2 --timeout 20 --grace 30", "mismatch");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("[rank 1] error: comm recv from rank 0, tag 4 (rank 1 of 2, gloo): "
                                  "rank 0 sent [2, 8] f32 but this receive expects [2, 4] f32"));
}

TEST_CASE("gloo: when a rank dies mid-exchange the others fail within the timeout", "[comm][gloo]") {
  // The survivors ignore SIGTERM here, so their own errors show; a long grace lets them report.
  test::CommandResult r = launch("-n 4 --timeout 5 --grace 30", "dies");
  INFO(r.output);
  REQUIRE(r.status == 3);  // rank 2's status
  REQUIRE_THAT(r.output, Contains("brigade launch: rank 2 exited with status 3"));
  for (int rank : {0, 1, 3})
    REQUIRE_THAT(r.output, Contains("[rank " + std::to_string(rank) + "] error: comm "));
  // Rank 3 waited on rank 2 directly: its error names that peer and the tag.
  REQUIRE_THAT(r.output, Contains("[rank 3] error: comm recv from rank 2, tag 1 (rank 3 of 4, gloo)"));
  REQUIRE(r.seconds < 20);
}

TEST_CASE("gloo: a rank that stops answering makes the others time out", "[comm][gloo]") {
  test::CommandResult r = launch("-n 3 --timeout 1 --grace 1", "hangs");
  INFO(r.output);
  REQUIRE(r.status == 1);
  REQUIRE_THAT(r.output, Contains("error: comm ") && Contains("timed out after 1 s") && Contains("aborted"));
  REQUIRE(r.seconds < 15);
}

// ---- in one process: gloo ranks as threads, meeting through a store in memory ----

namespace {

// Ranks 0..present-1 of a group of n, each a thread; rank r waits start_delay * r before it
// connects, like processes that start at different times. A rank that fails to connect leaves its
// slot empty and its error in `errors`.
std::vector<std::unique_ptr<comm::Communicator>> gloo_threads(int n, int present, const comm::GlooOptions& options,
                                                              std::chrono::milliseconds start_delay,
                                                              std::vector<std::string>& errors) {
  std::shared_ptr<comm::Store> store = comm::make_memory_store();
  auto comms = std::vector<std::unique_ptr<comm::Communicator>>(size_t(n));
  errors.assign(size_t(present), "");
  std::vector<std::thread> threads;
  for (int r = 0; r < present; ++r)  // connecting blocks until every rank is there: one thread each
    threads.emplace_back([&, r] {
      std::this_thread::sleep_for(start_delay * r);
      try {
        comms[size_t(r)] = comm::gloo_communicator(store, r, n, options);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return comms;
}

std::vector<std::unique_ptr<comm::Communicator>> gloo_threads(int n, std::chrono::milliseconds timeout) {
  comm::GlooOptions options;
  options.timeout = timeout;  // connecting keeps its own, longer timeout
  std::vector<std::string> errors;
  auto comms = gloo_threads(n, n, options, std::chrono::milliseconds(0), errors);
  for (const std::string& e : errors) REQUIRE(e.empty());
  return comms;
}

}  // namespace

TEST_CASE("gloo: ranks as threads of one process", "[comm][gloo]") {
  auto comms = gloo_threads(3, std::chrono::seconds(20));
  std::vector<Tensor> got(3), varying(3), sums(3), halves(3), bcast(3), self(3);
  std::vector<int> sub_sizes(3);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    size_t r = size_t(c.rank());
    int next = (c.rank() + 1) % 3, prev = (c.rank() + 2) % 3;
    std::vector<P2P> ops = {P2P::send(full({5, 7}, c.rank(), DType::f64), next, 3), P2P::recv(prev, 3)};
    c.exchange(ops);
    got[r] = ops[1].tensor;
    for (int64_t n = 1; n <= 3; ++n) {
      std::vector<P2P> v = {P2P::send(zeros({n}, DType::i32), next, 4, comm::Shapes::varying),
                            P2P::recv(prev, 4, comm::Shapes::varying)};
      c.exchange(v);
      varying[r] = v[1].tensor;
    }
    std::vector<P2P> to_self = {P2P::send(full({2}, 9), c.rank(), 5), P2P::recv(c.rank(), 5)};
    c.exchange(to_self);
    self[r] = to_self[1].tensor;
    sums[r] = full({1000}, c.rank() + 1, DType::f32);
    c.all_reduce(sums[r]);
    halves[r] = full({10}, c.rank(), DType::bf16);
    c.all_reduce(halves[r], comm::ReduceOp::average);
    bcast[r] = c.rank() == 1 ? arange(0, 6, 1, DType::i64) : zeros({6}, DType::i64);
    c.broadcast(bcast[r], 1);
    c.barrier();
    auto sub = c.split(c.rank() == 0 ? -1 : 0);
    sub_sizes[r] = sub ? sub->size() : 0;
    if (sub) sub->barrier();
  });
  for (size_t r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    REQUIRE(got[r].to_vector() == full({5, 7}, double((r + 2) % 3), DType::f64).to_vector());
    REQUIRE(varying[r].shape() == Shape{3});
    REQUIRE(self[r].to_vector() == std::vector<double>{9, 9});
    REQUIRE(sums[r].to_vector() == full({1000}, 6, DType::f32).to_vector());
    REQUIRE(halves[r].to_vector() == full({10}, 1, DType::bf16).to_vector());
    REQUIRE(bcast[r].to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5});
    REQUIRE(sub_sizes[r] == (r == 0 ? 0 : 2));
  }
}

TEST_CASE("gloo: a group of one still runs every verb", "[comm][gloo]") {
  auto comms = gloo_threads(1, std::chrono::seconds(10));
  comm::Communicator& c = *comms[0];
  Tensor x = full({4}, 2);
  c.all_reduce(x);
  c.all_reduce(x, comm::ReduceOp::average);
  c.broadcast(x, 0);
  c.barrier();
  REQUIRE(x.to_vector() == std::vector<double>{2, 2, 2, 2});
  c.send(x, 0);
  REQUIRE(c.recv(0).to_vector() == x.to_vector());
  REQUIRE_THROWS_WITH(c.recv(0, 1), Contains("nothing was sent to itself on this tag"));
}

TEST_CASE("gloo: a receive with no sender times out and aborts", "[comm][gloo]") {
  auto comms = gloo_threads(2, std::chrono::milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(comms[1]->recv(0, 6), comm::TimeoutError);
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  REQUIRE(comms[1]->aborted());
  REQUIRE_THROWS_WITH(comms[1]->recv(0, 6), Contains("comm recv from rank 0, tag 6 (rank 1 of 2, gloo)") &&
                                                Contains("aborted earlier") && Contains("timed out after 0.3 s"));
  // Rank 1 closed its sockets: rank 0's next call with it fails at once instead of timing out.
  comms[0]->set_timeout(std::chrono::seconds(30));
  start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(comms[0]->recv(1, 0), Contains("comm recv from rank 1, tag 0 (rank 0 of 2, gloo)"));
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("gloo: run_rank_threads finds the failing rank; its peer's broken connection counts as an abort",
          "[comm][gloo]") {
  auto comms = gloo_threads(2, std::chrono::seconds(20));
  const auto start = std::chrono::steady_clock::now();
  const comm::RankOutcomes outcomes = comm::run_rank_threads(comms, [&](int r) {
    if (r == 1) fail("rank 1 gave up");
    comms[0]->recv(1);  // ended by the runner's abort, not by the 20 s timeout
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE(outcomes.root_cause() == 1);
  CHECK(outcomes.at(0).aborted);
  CHECK_THAT(outcomes.message(0), Contains("comm recv from rank 1, tag 0 (rank 0 of 2, gloo)"));
}

TEST_CASE("gloo: connecting waits for late ranks longer than a call may wait, up to its own timeout",
          "[comm][gloo]") {
  comm::GlooOptions options;
  options.timeout = std::chrono::milliseconds(200);
  options.connect_timeout = std::chrono::seconds(30);
  std::vector<std::string> errors;
  auto comms = gloo_threads(3, 3, options, std::chrono::milliseconds(500), errors);  // rank 2 starts 1 s late
  for (size_t r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    REQUIRE(comms[r]->timeout() == std::chrono::milliseconds(200));  // calls keep the short timeout
  }
  REQUIRE(test::run_ranks(comms, [](comm::Communicator& c) { c.barrier(); }) == std::vector<std::string>(3));

  // Rank 2 never comes: ranks 0 and 1 give up at the connect timeout and name the missing rank.
  options.connect_timeout = std::chrono::seconds(2);
  auto start = std::chrono::steady_clock::now();
  gloo_threads(3, 2, options, std::chrono::milliseconds(0), errors);
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE_THAT(errors[r], Contains("connect through memory store (rank " + std::to_string(r) + " of 3, gloo)") &&
                                Contains("rank 2 never arrived") &&
                                Contains("timed out after 2 s"));
  }
}

TEST_CASE("gloo: a rank frozen at any moment of connecting or running fails the others within the timeouts",
          "[comm][gloo]") {
  // Four ranks of the ring scenario, started without a launcher (which would stop the others at
  // once); one rank is frozen (SIGSTOP: alive, sockets open, silent — a hung host) after a delay
  // that lands it in the store's rendezvous, gloo's full-mesh connect, or the ring itself. Rank 0
  // serves the store; rank 1 is an ordinary peer. Whatever the moment, every other rank must end
  // within the connect timeout (3 s) plus the call timeout (3 s) plus slack (start-up on a busy
  // machine), and a failure must say what it waited for. (This gloo waits 5x its timeout in a
  // pair's initial connect: without comm/gloo.cpp's bound that alone would take 15 s.)
  int failures = 0;
  for (int frozen : {0, 1}) {
    for (double delay : {0.05, 0.15, 0.25, 0.35, 0.5}) {
      const std::string dir = "/tmp/brigade-test-freeze-" + std::to_string(getpid());
      std::filesystem::create_directories(dir);
      std::vector<std::unique_ptr<test::Background>> ranks;
      const int this_port = test::free_port();
      for (int r = 0; r < 4; ++r)
        ranks.push_back(std::make_unique<test::Background>(
            "env RANK=" + std::to_string(r) + " WORLD_SIZE=4 LOCAL_RANK=" + std::to_string(r) +
                " LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(this_port) +
                " BRIGADE_CONNECT_TIMEOUT=3 BRIGADE_COMM_TIMEOUT=3 " + COMM_WORKER + " ring",
            dir + "/rank" + std::to_string(r) + ".log"));
      std::this_thread::sleep_for(std::chrono::milliseconds(int(delay * 1000)));
      kill(ranks[size_t(frozen)]->pid(), SIGSTOP);
      for (int r = 0; r < 4; ++r) {
        if (r == frozen) continue;
        const int status = ranks[size_t(r)]->wait(20);
        const std::string out = ranks[size_t(r)]->output();
        INFO("rank " << frozen << " frozen after " << delay << " s; rank " << r << " said: " << out);
        REQUIRE(status >= 0);
        REQUIRE(std::chrono::duration<double>(ranks[size_t(r)]->ended() - ranks[size_t(r)]->started()).count() <
                3 + 3 + 4);
        if (status == 0) continue;
        ++failures;
        REQUIRE(status == 1);
        // The frozen rank times out, or a rank that timed out on it exits and its peers say so.
        REQUIRE_THAT(out, Contains("timed out after") || Contains("rank " + std::to_string(frozen)) ||
                              Contains("connecting to TCP store") || Contains("waiting for key") ||
                              Contains("did that rank exit or abort?"));
      }
      kill(ranks[size_t(frozen)]->pid(), SIGKILL);
      ranks.clear();
      std::filesystem::remove_all(dir);
    }
  }
  REQUIRE(failures > 0);  // some freeze did strike before the ring was done
}

TEST_CASE("gloo: a dtype mismatch names both sides; the receiver's abort reaches the sender", "[comm][gloo]") {
  auto comms = gloo_threads(2, std::chrono::seconds(20));
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    if (c.rank() == 0) {
      c.send(zeros({3, 4}, DType::bf16), 1, 8);
      c.send(zeros({3, 4}, DType::bf16), 1, 8);  // the receiver has aborted by now, or will
    } else {
      c.recv_into(zeros({3, 4}, DType::f32), 0, 8);
    }
  });
  REQUIRE_THAT(errors[1], Contains("comm recv from rank 0, tag 8 (rank 1 of 2, gloo): "
                                   "rank 0 sent [3, 4] bf16 but this receive expects [3, 4] f32"));
  REQUIRE_THAT(errors[0], Contains("comm send to rank 1, tag 8 (rank 0 of 2, gloo)"));
}

TEST_CASE("gloo: every schedule runs on gloo ranks as on local threads, bit for bit, fixed and varying shapes",
          "[comm][gloo][pipeline]") {
  // Gloo's sends wait for their receivers, and a receive whose header is not in yet cannot post its
  // data receive: an exchange that made a send wait for a header (naive and GPipe did, on their
  // first step) hangs here until the timeout. Local threads queue sends: the reference.
  for (const test::GridPoint& c : test::schedule_grid(3)) {
    for (bool varying : {false, true}) {
      DYNAMIC_SECTION(pipeline::schedule_name(c.kind) << " P=" << c.P << " M=" << c.M << " V=" << c.V
                                                      << (varying ? " varying" : " fixed")) {
        auto local = comm::local_group(c.P);
        const test::StepResult want = test::pipeline_step(local, c.kind, c.M, c.V, varying);
        for (const std::string& e : want.errors) REQUIRE(e.empty());
        auto gloo = gloo_threads(c.P, std::chrono::seconds(10));
        const test::StepResult got = test::pipeline_step(gloo, c.kind, c.M, c.V, varying);
        for (size_t r = 0; r < got.errors.size(); ++r) {
          INFO("rank " << r << ": " << got.errors[r]);
          REQUIRE(got.errors[r].empty());
        }
        REQUIRE(got.losses == want.losses);
        REQUIRE(got.grads == want.grads);
      }
    }
  }
}

TEST_CASE("gloo: the pipeline trains across gloo processes, bit for bit as on threads", "[comm][launch]") {
  // The same schedule, kernels and summation order on both transports; --clip 0 because the global
  // norm's all-reduce may add the ranks' partial sums in another order. Interleaved with M = 2P is
  // the schedule whose exchanges must be combined per iteration (MessagePlacement::per_iteration);
  // with its messages next to their actions it would hang here. ZB-V's neighbours send to each
  // other both ways; its exchanges (and DualPipeV's) go in lock-step (MessagePlacement::lock_step).
  struct Config {
    const char* flags;
    const char* banner;
  };
  for (const Config& c : {Config{"--stages 4 --schedule 1f1b --microbatches 4", "4 stages on 4 ranks (processes), "
                                                                                 "schedule 1f1b"},
                          Config{"--stages 2 --chunks 2 --schedule interleaved --microbatches 4",
                                 "4 stages on 2 ranks (processes), schedule interleaved"},
                          Config{"--stages 2 --schedule zb-v --microbatches 4",
                                 "4 stages on 2 ranks (processes), schedule zb-v"},
                          Config{"--stages 2 --schedule dualpipev --microbatches 4",
                                 "4 stages on 2 ranks (processes), schedule dualpipev"}}) {
    const int ranks = std::string(c.flags).find("--stages 4") != std::string::npos ? 4 : 2;
    DYNAMIC_SECTION(c.flags) {
      const std::string train = std::string(BRIGADE_CLI) + " train " + c.flags +
                                " --batch 16 --steps 40 --layers 2 --heads 2 --embd 32 --digits 4 --warmup 5 "
                                "--log-every 20 --eval 50 --clip 0 --trace none --svg none --threads 1 --device cpu";
      test::CommandResult processes =
          test::run_command(std::string(BRIGADE_CLI) + " launch -n " + std::to_string(ranks) + " -- " + train);
      INFO(processes.output);
      REQUIRE(processes.status == 0);
      REQUIRE_THAT(processes.output, Contains(std::string("[rank 0] pipeline: ") + c.banner));
      REQUIRE_THAT(processes.output, Contains("[rank 0] bubble (last step): measured"));
      test::CommandResult threads = test::run_command(train);
      INFO(threads.output);
      REQUIRE(threads.status == 0);
      // Every loss line and the final report agree exactly.
      auto from_processes = test::lines_with(processes.output, "loss=");
      REQUIRE(from_processes.size() == 2);
      REQUIRE(from_processes == test::lines_with(threads.output, "loss="));
      REQUIRE(test::lines_with(processes.output, "loss: ") == test::lines_with(threads.output, "loss: "));
      REQUIRE(test::lines_with(processes.output, "held-out accuracy") ==
              test::lines_with(threads.output, "held-out accuracy"));
    }
  }
}

TEST_CASE("launch: --max-restarts restarts the job after a rank dies; it resumes and ends as if uninterrupted",
          "[comm][launch][elastic]") {
  // A 4-process pipeline checkpoints every 10 steps into a directory. Rank 2 is killed once the step-20
  // checkpoint is out; the launcher restarts the whole job, which resumes from the newest complete
  // checkpoint, recomputes at most 10 steps, and finishes with the parameters of an uninterrupted run.
  const std::string dir = "/tmp/brigade-test-elastic-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string train = std::string(BRIGADE_CLI) +
                            " train --stages 4 --schedule 1f1b --microbatches 4 --batch 16 --steps 200 --layers 2 "
                            "--heads 2 --embd 32 --digits 4 --warmup 5 --log-every 10 --eval 20 --clip 0 --trace none "
                            "--svg none --threads 1 --device cpu --save-every 10 --keep 3";
  test::Background job(std::string(BRIGADE_CLI) + " launch -n 4 --max-restarts 2 --timeout 20 -- " + train +
                           " --save " + dir + "/elastic/",
                       dir + "/job.log");
  REQUIRE(job.wait_for_output("saved " + dir + "/elastic/step-00000020 ", 120));
  // The launcher's children are the ranks, started in rank order.
  const std::vector<int> ranks = test::children_of(job.pid());
  REQUIRE(ranks.size() == 4);
  REQUIRE(kill(ranks[2], SIGKILL) == 0);
  const int status = job.wait(240);
  const std::string log = job.output();
  INFO(log);
  REQUIRE(status == 0);
  REQUIRE_THAT(log, Contains("brigade launch: rank 2 was killed by signal 9") &&
                        Contains("brigade launch: restarting the job (restart 1 of 2)"));
  // It resumed from the newest checkpoint written before the kill, so at most 10 steps run twice.
  int last_saved = 0;
  size_t restart_at = log.find("restarting the job");
  for (size_t at = log.find("saved "); at < restart_at; at = log.find("saved ", at + 1))
    last_saved = std::atoi(log.c_str() + log.find(" at step ", at) + 9);
  const std::string resumed = "resumed from " + dir + "/elastic/step-";
  REQUIRE(test::count(log, resumed) == 1);
  const int resumed_step = std::atoi(log.c_str() + log.find(" at step ", log.find(resumed)) + 9);
  REQUIRE(resumed_step == last_saved);
  REQUIRE(resumed_step >= 20);
  // Equal, bit for bit, to the same run never interrupted.
  test::CommandResult straight = test::run_command(std::string(BRIGADE_CLI) + " launch -n 4 --timeout 20 -- " +
                                                   train + " --save " + dir + "/straight/");
  INFO(straight.output);
  REQUIRE(straight.status == 0);
  nn::Checkpoint got = nn::load_checkpoint(dir + "/elastic/step-00000200");
  nn::Checkpoint want = nn::load_checkpoint(dir + "/straight/step-00000200");
  REQUIRE(got.model.size() == want.model.size());
  for (const auto& [name, t] : want.model) {
    INFO(name);
    REQUIRE(got.model.count(name) == 1);
    REQUIRE(got.model.at(name).to_vector() == t.to_vector());
  }
  for (const auto& [name, t] : want.optimizer) {
    INFO(name);
    REQUIRE(got.optimizer.at(name).to_vector() == t.to_vector());
  }
  std::filesystem::remove_all(dir);
}

namespace {

// The peak resident set size (KiB) of `command` and every process it started and waited for, as the
// kernel counts it (wait4's rusage: the largest of the process tree): nothing brigade counts itself.
long peak_rss_kib(const std::string& command) {
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", (command + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  REQUIRE(wait4(pid, &status, 0, &usage) == pid);
  INFO(command);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return usage.ru_maxrss;
}

}  // namespace

TEST_CASE("launch: a parameter-dominated GPT on four processes needs under half of one device's memory per rank",
          "[comm][launch][memory]") {
  // Each rank builds only its own layers, so the busiest of four holds about a quarter of the
  // weights, gradients and AdamW moments. The OS measures (peak RSS, net of what a tiny run's process
  // holds: libraries, the runtime); bench/rank_memory.py records the ratio on a larger model (0.32).
  const std::string dir = "/tmp/brigade-test-rank-memory-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string common = " --batch 8 --microbatches 4 --digits 4 --eval 8 --threads 1 --device cpu --trace none "
                             "--svg none --steps 2";
  const std::string model = " --layers 8 --embd 384 --heads 6";  // 14M parameters: 230 MB of training state
  const std::string cli = std::string(BRIGADE_CLI);
  const long tiny = peak_rss_kib(cli + " train --stages 0 --layers 1 --embd 16 --heads 1" + common + " --save " + dir +
                                 "/tiny/");
  const long one = peak_rss_kib(cli + " train --stages 0" + model + common + " --save " + dir + "/one/");
  // wait4 on the launcher: the largest of it and its four ranks, i.e. the busiest rank.
  const long busiest = peak_rss_kib(cli + " launch -n 4 -- " + cli + " train --stages 4" + model + common +
                                    " --save " + dir + "/four/");
  const double ratio = double(busiest - tiny) / double(one - tiny);
  INFO("tiny " << tiny << " KiB, one device " << one << " KiB, busiest of four ranks " << busiest << " KiB: "
               << ratio << " of one device, net");
  REQUIRE(one - tiny > 150 * 1024);  // the model dominates what one device holds
  CHECK(ratio < 0.5);
  CHECK(ratio > 0.1);  // each rank does hold its share
  std::filesystem::remove_all(dir);
}
