// The emulated NCCL's tasks: what runs on a stream for one group of one rank, and the deadlock check.
//
// Written from the NCCL User Guide's "Point-to-point communication" (the calls of a group progress
// independently and never block each other; ncclSend and ncclRecv are "blocking for the GPU") and
// "Error handling and communicator abort" (ncclCommAbort ends operations that have not completed).
//
// A task starts all of its steps (sends post their data, collectives their contributions), then
// polls them until every one is done. When a whole pass moves nothing and nothing has changed in
// the world since it began, the task registers as a Waiter and sleeps until something changes.
// Deadlock: a communicator whose ranks all live in this process, every rank with at least one
// running task or link setup and every one of those waiting on an unchanged world — nothing can
// ever move (a task queued behind a waiting one on the same stream cannot run either; a setup
// counts only while the rank it waits for is in a setup too, see check_deadlock). The report names what
// every rank waits for; it becomes every rank's asynchronous error, and the tasks go on waiting (a
// GPU would hang) until ncclCommAbort ends them.
//
// Not modelled: a rank that issues one communicator's operations on several streams at once, whose
// later task could run beside a waiting one; the check assumes it cannot (NCCL does not promise it
// either). Ranks in other processes are never part of a report: their state is not visible here.
#include <cstdio>

#include "emulator/nccl_internal.h"

namespace brigade::emu::nccl {
namespace {

std::string join_waits(const Steps& steps) {
  std::string text;
  for (const auto& step : steps)
    if (!step->done()) text += (text.empty() ? "" : " and ") + step->waits();
  return text;
}

}  // namespace

// With world.mutex held: reports the deadlock if every rank of an all-local world waits (a task,
// or a link setup: nccl_connect.cpp).
void check_deadlock(World& world) {
  if (!world.all_local || world.deadlock_reported_at == world.generation) return;
  // A setup waits for its peer's host to start the mirror setup, which a rank whose waits are all
  // tasks could still do (a setup runs at once, not behind the stream's tasks); a rank already in a
  // setup cannot (a non-blocking one refuses calls meanwhile, a blocking one's host waits in it).
  // So a setup's wait counts only when the rank it waits for is itself in a setup.
  std::vector<char> in_setup(size_t(world.nranks), 0);
  for (const Waiter* w : world.waiters)
    if (w->setup_peer >= 0 && w->generation == world.generation) in_setup[size_t(w->rank)] = 1;
  for (const Waiter* w : world.waiters)
    if (w->setup_peer >= 0 && w->generation == world.generation && !in_setup[size_t(w->setup_peer)]) return;
  std::string report;
  for (int r = 0; r < world.nranks; ++r) {
    const Rank* member = world.members[size_t(r)];
    if (member == nullptr || member->running == 0) return;
    int waiting = 0;
    std::string waits;
    for (const Waiter* w : world.waiters)
      if (w->rank == r && w->generation == world.generation) {
        ++waiting;
        waits += (waits.empty() ? "" : "; ") + w->waits;
      }
    if (waiting < member->running) return;
    report += (report.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " waits in " + waits);
  }
  report = "deadlock on communicator " + world.short_name() + " (" + std::to_string(world.nranks) +
           (world.nranks == 1 ? " rank" : " ranks") + ", all in this process): every rank waits for another and none can move: " + report;
  std::fprintf(stderr, "brigade emulated NCCL: %s\n", report.c_str());
  for (Rank* member : world.members) set_async_error(*member, ncclInvalidUsage, report);
  world.deadlock_reported_at = world.generation;  // after the bumps: once per stuck state
}

namespace {

// "" unless a rank the unfinished steps wait for has aborted (then what went wrong).
std::string aborted_peer(Rank& rank, const Steps& steps) {
  World& world = *rank.world;
  for (const auto& step : steps) {
    if (step->done()) continue;
    for (int peer : step->awaited()) {
      bool gone;
      {
        std::lock_guard<std::mutex> lock(world.mutex);
        gone = world.peer_aborted[size_t(peer)] != 0;
      }
      if (!gone && !world.local[size_t(peer)]) gone = remote_aborted(world, peer);
      if (gone)
        return "rank " + std::to_string(peer) + " called ncclCommAbort while " + rank.name() + " waited in " +
               step->waits();
    }
  }
  return "";
}

// Polls every unfinished step once: true when something moved; an error ends the task.
bool poll_all(Rank& rank, Steps& steps, StepResult* failure) {
  bool moved = false;
  for (auto& step : steps) {
    if (step->done()) continue;
    StepResult result = step->poll(rank);
    if (result.error != ncclSuccess) {
      *failure = result;
      return true;
    }
    moved = moved || result.moved;
  }
  return moved;
}

bool all_done(const Steps& steps) {
  return std::all_of(steps.begin(), steps.end(), [](const auto& step) { return step->done(); });
}

}  // namespace

std::string run_task(const std::shared_ptr<Rank>& rank, Steps& steps, const std::shared_ptr<Gate>& gate) {
  World& world = *rank->world;
  // Not counted as running while it waits for its link setup: that wait is the setup job's, which
  // ends by itself (done, failed, timed out or aborted), and no step has started.
  const bool connected = wait_for_gate(*rank, gate);
  std::unique_lock<std::mutex> lock(world.mutex);
  if (!connected) {
    --rank->outstanding;
    world.bump();
    return "";  // NCCL launches no kernel for a group whose setup failed: nothing ran
  }
  ++rank->running;
  auto finish = [&](std::string fault) {
    if (!lock.owns_lock()) lock.lock();
    --rank->running;
    --rank->outstanding;
    world.bump();
    return fault;
  };
  if (rank->aborted) return finish("");
  lock.unlock();
  for (auto& step : steps) {
    std::string fault = step->start(*rank);
    if (fault.empty()) continue;
    lock.lock();
    set_async_error(*rank, ncclUnhandledCudaError, fault);
    return finish(fault);  // an illegal address: a CUDA fault, reported by the stream too
  }
  Waiter waiter{rank->rank, 0, ""};
  for (;;) {
    lock.lock();
    if (rank->aborted) return finish("");
    const uint64_t seen = world.generation;
    lock.unlock();
    StepResult failure;
    const bool moved = poll_all(*rank, steps, &failure);
    if (failure.error != ncclSuccess) {
      lock.lock();
      set_async_error(*rank, failure.error, failure.text);
      return finish("");
    }
    if (all_done(steps)) return finish("");
    if (moved) continue;
    const std::string gone = aborted_peer(*rank, steps);
    lock.lock();
    if (!gone.empty()) {
      set_async_error(*rank, ncclRemoteError, gone);
      return finish("");
    }
    if (world.generation == seen && !rank->aborted) {
      waiter.generation = seen;
      waiter.waits = join_waits(steps);
      world.waiters.push_back(&waiter);
      check_deadlock(world);
      // Ranks of this process notify every change; files of other processes need a short nap.
      world.changed.wait_for(lock, std::chrono::milliseconds(world.all_local ? 100 : 2));
      world.waiters.erase(std::find(world.waiters.begin(), world.waiters.end(), &waiter));
    }
    lock.unlock();
  }
}

}  // namespace brigade::emu::nccl
