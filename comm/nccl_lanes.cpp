// The NCCL transport's lanes and watchdog (comm/nccl_communicator.h): a brigade communicator's three
// NCCL communicators and their streams, queuing a group of calls on one without letting an abort free
// it mid-call, and a thread that follows every queued transfer until the GPU is done with it, and
// aborts the communicator when one outlives its deadline or NCCL reports an error.
#include "comm/nccl_communicator.h"

#include <algorithm>
#include <iostream>

#include "core/cuda/check.h"
#include "core/cuda/guard.h"

namespace brigade::comm {

namespace nccl_detail {

namespace {

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return ncclInProgress instead of blocking; we poll against deadlines
  return config;
}

// The configuration of the communicator that carries only headers: 64-byte messages need no more
// than one thread block (so one channel) in all.
ncclConfig_t header_config() {
  ncclConfig_t config = nonblocking_config();
  config.minCTAs = 1;
  config.maxCTAs = 1;
  return config;
}

}  // namespace

ncclResult_t poll_ready(ncclComm_t comm, const Deadline& deadline) {
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclInProgress;
    ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) return result;
    if (state != ncclInProgress) return state;
    if (deadline.passed()) return ncclInProgress;
    // Usually ready within microseconds; first-time connection setup can take much longer.
    if (polls < 1000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// What a call on a non-blocking communicator came to. Its return value alone does not say: NCCL
// 2.28.9's ncclCommSplit returns ncclSuccess while the split still runs as a job of the parent (its
// group end's ncclInProgress is passed over), and the parent's next call is then refused ("Attempt
// to use communicator before the previous operation returned ncclSuccess", invalid argument) —
// seen on an H200. So unless the call failed outright, ask ncclCommGetAsyncError until it settles.
ncclResult_t outcome(ncclComm_t comm, ncclResult_t returned, const Deadline& deadline) {
  if (returned != ncclSuccess && returned != ncclInProgress) return returned;
  return poll_ready(comm, deadline);
}

void check_queued(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result != ncclInProgress) nccl_check(result, expr, file, line);
}

std::string nccl_error(ncclComm_t comm, ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  if (detail && *detail) text += std::string(": ") + detail;
  return text;
}

ncclConfig_t lane_config(size_t lane) { return lane == kHeaders ? header_config() : nonblocking_config(); }

std::string lane_suffix(size_t lane) {
  return lane == kUp ? "" : lane == kDown ? " (its downward data communicator)" : " (its header communicator)";
}

void abort_all(NcclComms& comms) {
  for (ncclComm_t& comm : comms)
    if (comm != nullptr) ncclCommAbort(comm), comm = nullptr;
}

}  // namespace nccl_detail

using namespace nccl_detail;

NcclCommunicator::NcclCommunicator(NcclComms comms, int rank, int size, Device device, Milliseconds timeout)
    : Communicator("nccl", rank, size, device, timeout), comms_(comms) {
  // Pinned memory for arriving headers, allocated once, here: allocating or freeing it later may
  // wait for the whole device (CUDA's implicit synchronisation), including an NCCL kernel that
  // waits for a peer which waits for this rank — a hang found on the emulator.
  try {
    for (Stream& stream : streams_) stream = Stream::create(device);
    BRIGADE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_), kPinnedHeaders * sizeof(WireHeader)));
  } catch (...) {
    abort_all(comms_);  // ours now: nobody else would end them
    throw;
  }
  watchdog_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  // Let queued transfers finish first, with the watchdog still enforcing their deadlines (it
  // aborts a stuck one, which ends the wait).
  bool drained = false;
  try {
    drained = wait_quietly(Deadline::after(timeout()));
  } catch (const std::exception& e) {
    std::cerr << "brigade: closing an nccl communicator: " << e.what() << "\n";
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  watchdog_.join();
  for (ncclComm_t& comm : comms_) {
    if (comm == nullptr) continue;
    // Finalize flushes NCCL's own pending work; if anything is stuck, abort instead.
    Deadline deadline = Deadline::after(timeout());
    ncclResult_t result = drained ? outcome(comm, ncclCommFinalize(comm), deadline) : ncclInternalError;
    if (result == ncclSuccess) ncclCommDestroy(comm);
    else ncclCommAbort(comm);
    comm = nullptr;
  }
  // Never free memory a GPU kernel may still touch: what did not finish is leaked on purpose.
  if (drained) in_flight_.clear();
  if (!in_flight_.empty()) new std::deque<InFlight>(std::move(in_flight_));
  if (pinned_ != nullptr) {
    const cudaError_t freed = cudaFreeHost(pinned_);
    if (freed != cudaSuccess)
      std::cerr << "brigade: closing an nccl communicator: cudaFreeHost: " << cudaGetErrorString(freed) << "\n";
  }
}

void NcclCommunicator::abort_transport(const std::string&) {
  // Also ends kernels waiting for peers, so the GPU (and whoever waits on it) is freed.
  std::lock_guard<std::mutex> lock(mutex_);
  abort_all(comms_);
}

// The lane's stream waits for everything queued so far on the caller's stream.
void NcclCommunicator::follow_caller(size_t lane) {
  Event ready = Event::create(device());
  ready.record(current_stream(device()));
  streams_[lane].wait(ready);
}

// Runs the NCCL calls of one group on a lane: calls(comm, stream). Non-blocking: ncclGroupEnd may
// answer "in progress", and the communicator is polled until the work is queued on the stream (not
// finished: that is the watchdog's business).
// The poll holds mutex_, so the watchdog and abort_transport wait for it. It stays: the lock keeps
// an abort from freeing the handle mid-call. It is bounded by the deadline (outcome polls no
// longer), but a group that sets links up or connects a collective algorithm at first use may poll
// that long (NCCL waits in it for the peers' setups), and so may an abort wait: connect and
// connect_collectives do both before a pipeline's first step. To verify on a GPU (docs/comm.md).
void NcclCommunicator::enqueue(size_t lane, const std::string& w, const Deadline& deadline, const Calls& calls) {
  ncclResult_t result;
  ncclComm_t comm = nullptr;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);  // abort must not free the communicators under our feet
    comm = comms_[lane];
    if (comm == nullptr) throw AbortedError(w + ": the communicator was aborted");
    BRIGADE_NCCL_CHECK(ncclGroupStart());
    try {
      calls(comm, raw(lane));
    } catch (...) {
      // Close the group (the error that matters is the one thrown), and on a non-blocking
      // communicator wait for NCCL's background job that the close may start: the caller may
      // abort or destroy the communicator next, which must not race that job.
      outcome(comm, ncclGroupEnd(), deadline);
      throw;
    }
    result = outcome(comm, ncclGroupEnd(), deadline);
    // Read NCCL's words while the handle is surely alive: the watchdog may abort it once we let go.
    if (result != ncclSuccess && result != ncclInProgress) error = nccl_error(comm, result);
  }
  if (result == ncclInProgress) fail_timeout(w, deadline, " while NCCL was queuing the transfer");
  if (result != ncclSuccess) {
    // A refused group leaves a non-blocking communicator with that asynchronous error (NCCL's group
    // cleanup), so it can do nothing more: abort it here, not whenever the watchdog looks next.
    abort(w + ": " + error);
    fail(w, ": ", error);
  }
}

// The watchdog follows what was queued on `stream` until it completes; `keep` stays alive until then.
void NcclCommunicator::follow(const std::string& w, const Deadline& deadline, const Stream& stream,
                              std::vector<Tensor> keep) {
  Event done = Event::create(device());
  done.record(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.push_back({done, deadline.at(), deadline.timeout(), w, std::move(keep)});
  wake_.notify_all();
}

// The caller's stream waits for the lane's; the watchdog follows the transfer until it completes.
void NcclCommunicator::finish(size_t lane, const std::string& w, const Deadline& deadline,
                              std::vector<Tensor> keep) {
  Event done = Event::create(device());
  done.record(streams_[lane]);
  current_stream(device()).wait(done);
  follow(w, deadline, streams_[lane], std::move(keep));
}

// Blocks the host until `stream` is idle, up to the deadline.
void NcclCommunicator::wait_for_stream(const std::string& w, const Deadline& deadline, const Stream& stream) {
  Event idle = Event::create(device());
  idle.record(stream);
  while (!idle.query()) {
    if (aborted()) throw AbortedError(w + ": the communicator was aborted while waiting for the GPU");
    if (deadline.passed()) fail_timeout(w, deadline);
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // ncclCommAbort ends NCCL's kernels, so an aborted communicator's stream goes idle too — with
  // whatever its receive buffers held: here, or at a peer (NCCL then reports an error).
  if (aborted()) throw AbortedError(w + ": the communicator was aborted while waiting for the GPU");
  std::lock_guard<std::mutex> lock(mutex_);
  for (ncclComm_t comm : comms_) {
    ncclResult_t state = ncclSuccess;
    if (comm != nullptr && ncclCommGetAsyncError(comm, &state) == ncclSuccess)
      BRIGADE_CHECK(state == ncclSuccess || state == ncclInProgress, w, ": NCCL reported ", nccl_error(comm, state));
  }
}

// Until our streams are idle (true), or the communicator is aborted or `backstop` passes (false).
bool NcclCommunicator::wait_quietly(const Deadline& backstop) {
  for (const Stream& stream : streams_) {
    Event idle = Event::create(device());
    idle.record(stream);
    while (!idle.query()) {
      if (aborted() || backstop.passed()) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return true;
}

// The watchdog: retires finished transfers; aborts the communicator when any unfinished one is
// past its deadline or NCCL reports an asynchronous error (a peer died, a network failed).
void NcclCommunicator::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(20));
    std::string problem;
    try {
      // Several streams feed the list, so a finished transfer may sit behind an unfinished one.
      in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                      [](const InFlight& f) { return f.done.query(); }),
                       in_flight_.end());
      if (comms_[kUp] == nullptr) continue;  // aborted (all lanes at once): nothing more to watch
      auto late = std::find_if(in_flight_.begin(), in_flight_.end(),
                               [](const InFlight& f) { return Clock::now() >= f.deadline; });
      if (late != in_flight_.end()) {
        problem = late->what + ": timed out after " + seconds_str(late->timeout) +
                  " (the transfer was still running on the GPU); the communicator is aborted";
      } else {
        for (ncclComm_t comm : comms_) {
          ncclResult_t state = ncclSuccess;
          ncclResult_t result = ncclCommGetAsyncError(comm, &state);
          if (result != ncclSuccess) state = result;
          if (state != ncclSuccess && state != ncclInProgress && problem.empty())
            problem = what("watchdog") + ": NCCL reported " + nccl_error(comm, state) +
                      "; the communicator is aborted";
        }
      }
    } catch (const std::exception& e) {
      problem = what("watchdog") + ": " + e.what();
    }
    if (problem.empty()) continue;
    lock.unlock();
    std::cerr << "brigade: " << problem << "\n";
    abort(problem);  // takes the lock itself
    lock.lock();
  }
}

}  // namespace brigade::comm
