#include "comm/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <thread>

#include "comm/nccl_check.h"
#include "core/cuda/check.h"
#include "core/cuda/guard.h"
#include "core/factory.h"
#include "core/stream.h"

namespace brigade::comm {

namespace {

ncclDataType_t nccl_dtype(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  fail("comm nccl: unsupported dtype ", int(t));
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return ncclInProgress instead of blocking; we poll against deadlines
  return config;
}

// Polls a communicator that is being created, split, or is enqueuing non-blockingly. Returns its
// final state (ncclSuccess or an error), or ncclInProgress if the deadline passed first.
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

// A call that may legitimately answer "queued, still in progress" on a non-blocking communicator.
void check_queued(ncclResult_t result, const char* expr, const char* file, int line) {
  if (result != ncclInProgress) nccl_check(result, expr, file, line);
}
#define BRIGADE_NCCL_QUEUED(expr) check_queued((expr), #expr, __FILE__, __LINE__)

std::string nccl_error(ncclComm_t comm, ncclResult_t result) {
  std::string text = ncclGetErrorString(result);
  const char* detail = comm ? ncclGetLastError(comm) : nullptr;
  if (detail && *detail) text += std::string(": ") + detail;
  return text;
}

// The configuration of the communicator that carries only headers: 64-byte messages need no more
// than one thread block (so one channel) in all.
ncclConfig_t header_config() {
  ncclConfig_t config = nonblocking_config();
  config.minCTAs = 1;
  config.maxCTAs = 1;
  return config;
}

// Each brigade communicator is two NCCL communicators over the same ranks: one for data, one for
// the headers (handshake.h) that tell a receiver what to allocate. NCCL runs a communicator's
// operations in the order they were issued, so a header behind data on the same communicator would
// wait for that data — which may wait for a peer that waits for this header (docs/comm.md).
struct NcclPair {
  ncclComm_t data = nullptr;
  ncclComm_t headers = nullptr;
};

class NcclCommunicator final : public Communicator {
 public:
  // Takes a ready pair of communicators.
  NcclCommunicator(NcclPair comms, int rank, int size, Device device, Milliseconds timeout)
      : Communicator("nccl", rank, size, device, timeout),
        comm_(comms.data),
        header_comm_(comms.headers) {
    // Pinned memory for arriving headers, allocated once, here: allocating or freeing it later may
    // wait for the whole device (CUDA's implicit synchronisation), including an NCCL kernel that
    // waits for a peer which waits for this rank — a hang found on the emulator.
    try {
      stream_ = Stream::create(device);
      header_stream_ = Stream::create(device);
      BRIGADE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_), kPinnedHeaders * sizeof(WireHeader)));
    } catch (...) {
      ncclCommAbort(comm_);  // ours now: nobody else would end them
      ncclCommAbort(header_comm_);
      throw;
    }
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
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
    for (ncclComm_t* comm : {&comm_, &header_comm_}) {
      if (*comm == nullptr) continue;
      // Finalize flushes NCCL's own pending work; if anything is stuck, abort instead.
      Deadline deadline = Deadline::after(timeout());
      ncclResult_t result = drained ? outcome(*comm, ncclCommFinalize(*comm), deadline) : ncclInternalError;
      if (result == ncclSuccess) ncclCommDestroy(*comm);
      else ncclCommAbort(*comm);
      *comm = nullptr;
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

 protected:
  void run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) override {
    cuda::DeviceGuard guard(device().index);
    std::string batch = transfers.size() == 1 ? transfers[0].what
                                              : what("exchange of " + std::to_string(transfers.size()) + " transfers");
    std::vector<Tensor> keep;
    if (std::any_of(transfers.begin(), transfers.end(), [](const Transfer& t) { return t.header; }))
      exchange_headers(transfers, deadline, keep);
    for (Transfer& t : transfers)
      if (t.op->kind == P2P::Kind::recv && !t.header) allocate_destination(*t.op, without_header(t));

    follow_caller();  // the data to send, and the destinations, belong to the caller's stream
    enqueue(batch, deadline, [&] {
      for (Transfer& t : transfers) {
        const Tensor& x = t.op->tensor;
        keep.push_back(x);
        if (x.numel() == 0) continue;
        if (t.op->kind == P2P::Kind::send)
          BRIGADE_NCCL_QUEUED(ncclSend(x.raw_data(), size_t(x.numel()), nccl_dtype(x.dtype()), t.op->peer, comm_,
                                       raw()));
        else
          BRIGADE_NCCL_QUEUED(ncclRecv(x.raw_data(), size_t(x.numel()), nccl_dtype(x.dtype()), t.op->peer, comm_,
                                       raw()));
      }
    });
    // The caller's stream waits only for what it will read: an exchange of sends alone is followed by
    // the watchdog (which keeps the tensors alive until NCCL is done with them) while the caller
    // computes on — the next forward need not wait for a neighbour to take the last activation.
    const bool receives = std::any_of(transfers.begin(), transfers.end(),
                                      [](const Transfer& t) { return t.op->kind == P2P::Kind::recv; });
    if (receives) finish(batch, deadline, std::move(keep));
    else follow(batch, deadline, stream_, std::move(keep));
  }

  void run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) override {
    current_stream(device()).wait(start_all_reduce(t, op, deadline, "all_reduce"));
  }

  bool overlaps_collectives() const override { return true; }

  // As run_all_reduce, but the caller's stream waits only when the returned function runs.
  std::function<void()> run_all_reduce_async(const Tensor& t, ReduceOp op, const Deadline& deadline) override {
    const Event done = start_all_reduce(t, op, deadline, "all_reduce_async");
    const Device d = device();
    return [done, d] { current_stream(d).wait(done); };
  }

  void run_broadcast(const Tensor& t, int root, const Deadline& deadline) override {
    cuda::DeviceGuard guard(device().index);
    std::string w = what("broadcast from rank " + std::to_string(root));
    follow_caller();
    enqueue(w, deadline, [&] {
      BRIGADE_NCCL_QUEUED(ncclBroadcast(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype()), root,
                                        comm_, raw()));
    });
    finish(w, deadline, {t});
  }

  void run_barrier(const Deadline& deadline) override {
    // NCCL has no barrier: a one-element all-reduce that the host then waits for.
    cuda::DeviceGuard guard(device().index);
    std::string w = what("barrier");
    Tensor token = zeros({1}, DType::i32, device());
    follow_caller();
    enqueue(w, deadline, [&] {
      BRIGADE_NCCL_QUEUED(ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclInt32, ncclSum, comm_, raw()));
    });
    finish(w, deadline, {token});
    wait_for_stream(w, deadline);
  }

  std::unique_ptr<Communicator> run_split(int color, int key, const std::vector<int>& members,
                                          const Deadline& deadline) override {
    cuda::DeviceGuard guard(device().index);
    std::string w = what("split");
    // A non-blocking split is a job of the PARENT, and NCCL writes the child's handle only when that
    // job is done (until then it is null): poll the parent, then the child's own initialisation.
    // The handle lives on the heap — if the deadline passes first, the job may still write it after
    // this function has returned, so on a timeout it is left behind on purpose.
    // Both communicators split alike, data first (every rank in the same order).
    NcclPair made;
    auto abort_made = [&] {
      for (ncclComm_t c : {made.data, made.headers})
        if (c != nullptr) ncclCommAbort(c);
    };
    for (bool headers : {false, true}) {
      ncclConfig_t config = headers ? header_config() : nonblocking_config();
      ncclResult_t result;
      std::string error;
      auto* child = new ncclComm_t(nullptr);
      {
        // The parent is read, used and asked for its error under the lock: an abort (the watchdog's,
        // a peer's failure) frees it.
        std::lock_guard<std::mutex> lock(mutex_);
        ncclComm_t parent = headers ? header_comm_ : comm_;
        if (parent == nullptr) {
          delete child;
          abort_made();
          fail(w, ": the communicator was aborted");
        }
        result = outcome(parent, ncclCommSplit(parent, members.empty() ? NCCL_SPLIT_NOCOLOR : color, key, child, &config),
                         deadline);
        if (result == ncclSuccess && *child != nullptr) result = poll_ready(*child, deadline);
        if (result != ncclSuccess && result != ncclInProgress) error = nccl_error(parent, result);
      }
      if (result == ncclInProgress) {
        abort_made();
        abort(w + " timed out");  // stops the parent's job, so it writes nothing more
        fail_timeout(w, deadline);
      }
      (headers ? made.headers : made.data) = *child;
      delete child;
      if (result != ncclSuccess) {
        abort_made();
        fail(w, ": ", error);
      }
    }
    if (members.empty()) return nullptr;
    if (made.data == nullptr || made.headers == nullptr) {
      abort_made();
      fail(w, ": NCCL reported success but made no communicator");
    }
    int index = int(std::find(members.begin(), members.end(), rank()) - members.begin());
    return std::make_unique<NcclCommunicator>(made, index, int(members.size()), device(), timeout());
  }

  void abort_transport(const std::string&) override {
    // Also ends kernels waiting for peers, so the GPU (and whoever waits on it) is freed.
    std::lock_guard<std::mutex> lock(mutex_);
    for (ncclComm_t* comm : {&comm_, &header_comm_}) {
      if (*comm != nullptr) ncclCommAbort(*comm);
      *comm = nullptr;
    }
  }

 private:
  struct InFlight {
    Event done;  // recorded after the transfer, on the stream it ran on (data or headers)
    Clock::time_point deadline;
    Milliseconds timeout;
    std::string what;
    std::vector<Tensor> keep;  // alive until the GPU is done with them (the allocator could reuse them)
  };

  cudaStream_t raw() const { return static_cast<cudaStream_t>(stream_.raw()); }

  // Queues the all-reduce on our stream after the caller's work; returns the event that marks its
  // end (the watchdog follows it and keeps `t` alive until then).
  Event start_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline, const std::string& name) {
    cuda::DeviceGuard guard(device().index);
    const std::string w = what(name + (op == ReduceOp::sum ? "(sum)" : "(average)"));
    follow_caller();
    enqueue(w, deadline, [&] {
      BRIGADE_NCCL_QUEUED(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), nccl_dtype(t.dtype()),
                                        op == ReduceOp::sum ? ncclSum : ncclAvg, comm_, raw()));
    });
    Event done = Event::create(device());
    done.record(stream_);
    follow(w, deadline, stream_, {t});
    return done;
  }

  // Our stream waits for everything queued so far on the caller's stream.
  void follow_caller() {
    Event ready = Event::create(device());
    ready.record(current_stream(device()));
    stream_.wait(ready);
  }

  // Runs the NCCL calls of one group. Non-blocking: ncclGroupEnd may answer "in progress", and the
  // communicator is polled until the work is queued on the stream (not finished: that is the
  // watchdog's business).
  // `calls` issue on comm_ (the data communicator), or on header_comm_ with `headers`.
  template <class Fn>
  void enqueue(const std::string& w, const Deadline& deadline, Fn&& calls, bool headers = false) {
    ncclResult_t result;
    ncclComm_t comm = nullptr;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(mutex_);  // abort must not free the communicators under our feet
      comm = headers ? header_comm_ : comm_;
      BRIGADE_CHECK(comm != nullptr, w, ": the communicator was aborted");
      BRIGADE_NCCL_CHECK(ncclGroupStart());
      try {
        calls();
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
    if (result != ncclSuccess) fail(w, ": ", error);
  }

  // The watchdog follows what was queued on `stream` until it completes; `keep` stays alive until then.
  void follow(const std::string& w, const Deadline& deadline, const Stream& stream, std::vector<Tensor> keep) {
    Event done = Event::create(device());
    done.record(stream);
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_.push_back({done, deadline.at(), deadline.timeout(), w, std::move(keep)});
    wake_.notify_all();
  }

  // The caller's stream waits for ours; the watchdog follows the transfer until it completes.
  void finish(const std::string& w, const Deadline& deadline, std::vector<Tensor> keep) {
    Event done = Event::create(device());
    done.record(stream_);
    current_stream(device()).wait(done);
    follow(w, deadline, stream_, std::move(keep));
  }

  // Blocks the host until `stream` (ours by default) is idle, up to the deadline.
  void wait_for_stream(const std::string& w, const Deadline& deadline, const Stream* stream = nullptr) {
    Event idle = Event::create(device());
    idle.record(stream ? *stream : stream_);
    while (!idle.query()) {
      BRIGADE_CHECK(!aborted(), w, ": the communicator was aborted while waiting for the GPU");
      if (deadline.passed()) fail_timeout(w, deadline);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    // ncclCommAbort ends NCCL's kernels, so an aborted communicator's stream goes idle too — with
    // whatever its receive buffers held: here, or at a peer (NCCL then reports an error).
    BRIGADE_CHECK(!aborted(), w, ": the communicator was aborted while waiting for the GPU");
    std::lock_guard<std::mutex> lock(mutex_);
    for (ncclComm_t comm : {comm_, header_comm_}) {
      ncclResult_t state = ncclSuccess;
      if (comm != nullptr && ncclCommGetAsyncError(comm, &state) == ncclSuccess)
        BRIGADE_CHECK(state == ncclSuccess || state == ncclInProgress, w, ": NCCL reported ", nccl_error(comm, state));
    }
  }

  // Until our stream is idle (true), or the communicator is aborted or `backstop` passes (false).
  bool wait_quietly(const Deadline& backstop) {
    for (const Stream* stream : {&stream_, &header_stream_}) {
      Event idle = Event::create(device());
      idle.record(*stream);
      while (!idle.query()) {
        if (aborted() || backstop.passed()) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    return true;
  }

  // Headers (handshake.h) must reach the host before the data can be received: they travel on a
  // communicator and stream of their own (NcclPair), through a small device buffer, and the host
  // waits for the arriving ones — only on a channel's first message, or on every message of a
  // varying-shape channel. Nothing here waits for the caller's stream or the data stream, so a
  // header is never queued behind data: the host waits only for headers, exactly as a rank of the
  // gloo transport waits for its messages, and every schedule gloo can run, NCCL runs.
  void exchange_headers(std::vector<Transfer>& transfers, const Deadline& deadline, std::vector<Tensor>& keep) {
    constexpr int64_t kWords = int64_t(sizeof(WireHeader) / sizeof(uint64_t));
    const size_t n = transfers.size();
    const size_t arriving = size_t(std::count_if(transfers.begin(), transfers.end(), [](const Transfer& t) {
      return t.header && t.op->kind == P2P::Kind::recv;
    }));
    BRIGADE_CHECK(arriving <= kPinnedHeaders, what("exchange of " + std::to_string(n) + " transfers"), ": ", arriving,
                  " of its receives wait for a header, more than the ", kPinnedHeaders,
                  " one exchange may hold; split it into several");
    Tensor slots;
    {
      // Allocated on the header stream: the allocator reuses the block only after that stream's
      // work, and nothing orders it after the caller's stream (which may wait for peers).
      StreamGuard on_headers(header_stream_);
      slots = empty({int64_t(n) * kWords}, DType::i64, device());
    }
    auto slot = [&](size_t i) { return static_cast<int64_t*>(slots.raw_data()) + int64_t(i) * kWords; };
    cudaStream_t stream = static_cast<cudaStream_t>(header_stream_.raw());
    std::vector<WireHeader> outgoing(n);
    for (size_t i = 0; i < n; ++i) {
      Transfer& t = transfers[i];
      if (!t.header || t.op->kind != P2P::Kind::send) continue;
      outgoing[i] = encode_header(TensorMeta::of(t.op->tensor, t.op->shapes));
      // From pageable memory: copied to a staging buffer before the call returns, so `outgoing` may go.
      BRIGADE_CUDA_CHECK(cudaMemcpyAsync(slot(i), &outgoing[i], sizeof(WireHeader), cudaMemcpyHostToDevice, stream));
    }
    // Named after its transfers: a failure here (say, NCCL refusing a lone receive) is theirs.
    size_t headered = 0;
    for (const Transfer& t : transfers) headered += t.header ? 1 : 0;
    std::string w;
    for (const Transfer& t : transfers)
      if (t.header && headered == 1) w = t.what + " (its header)";
    if (w.empty()) w = what("header exchange of " + std::to_string(headered) + " transfers");
    enqueue(
        w, deadline,
        [&] {
          for (size_t i = 0; i < n; ++i) {
            Transfer& t = transfers[i];
            if (!t.header) continue;
            if (t.op->kind == P2P::Kind::send)
              BRIGADE_NCCL_QUEUED(ncclSend(slot(i), size_t(kWords), ncclInt64, t.op->peer, header_comm_, stream));
            else
              BRIGADE_NCCL_QUEUED(ncclRecv(slot(i), size_t(kWords), ncclInt64, t.op->peer, header_comm_, stream));
          }
        },
        /*headers=*/true);
    if (arriving == 0) {
      follow(w, deadline, header_stream_, {slots});  // sends only: the watchdog bounds them
      return;
    }
    std::vector<size_t> landing(n);  // where each arriving header lands in pinned_
    size_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      Transfer& t = transfers[i];
      if (!t.header || t.op->kind != P2P::Kind::recv) continue;
      // Into pinned memory, so the copy is truly asynchronous and the host can wait with a deadline
      // (a copy into pageable memory would block right here, maybe forever).
      landing[i] = next++;
      BRIGADE_CUDA_CHECK(
          cudaMemcpyAsync(pinned_ + landing[i], slot(i), sizeof(WireHeader), cudaMemcpyDeviceToHost, stream));
    }
    for (Transfer& t : transfers)
      if (t.header && t.op->kind == P2P::Kind::recv) {
        wait_for_stream(t.what + " (its header)", deadline, &header_stream_);
        break;
      }
    keep.push_back(slots);
    for (size_t i = 0; i < n; ++i) {
      Transfer& t = transfers[i];
      if (!t.header || t.op->kind != P2P::Kind::recv) continue;
      TensorMeta sent = decode_header(pinned_[landing[i]], "rank " + std::to_string(t.op->peer));
      on_header(t, sent);
      allocate_destination(*t.op, sent);
    }
  }

  // The watchdog: retires finished transfers; aborts the communicator when any unfinished one is
  // past its deadline or NCCL reports an asynchronous error (a peer died, a network failed).
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(20));
      std::string problem;
      try {
        // Two streams feed the list, so a finished transfer may sit behind an unfinished one.
        in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                        [](const InFlight& f) { return f.done.query(); }),
                         in_flight_.end());
        if (comm_ == nullptr) continue;  // aborted: nothing more to watch
        auto late = std::find_if(in_flight_.begin(), in_flight_.end(),
                                 [](const InFlight& f) { return Clock::now() >= f.deadline; });
        if (late != in_flight_.end()) {
          problem = late->what + ": timed out after " + seconds_str(late->timeout) +
                    " (the transfer was still running on the GPU); the communicator is aborted";
        } else {
          for (ncclComm_t comm : {comm_, header_comm_}) {
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

  ncclComm_t comm_;         // data
  ncclComm_t header_comm_;  // headers only (NcclPair)
  Stream stream_;           // data transfers run here, fenced against the caller's stream by events
  Stream header_stream_;    // header transfers run here, fenced against nothing
  static constexpr size_t kPinnedHeaders = 1024;  // header receives one exchange may hold
  WireHeader* pinned_ = nullptr;
  std::mutex mutex_;  // guards comm_'s lifetime against abort, and in_flight_
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  bool stopping_ = false;
  std::thread watchdog_;
};

std::atomic<int> communicators_created{0};

// Waits until a freshly initialised communicator is ready; aborts it and throws otherwise.
void settle(ncclComm_t comm, ncclResult_t result, const Deadline& deadline, const std::string& w) {
  if (comm == nullptr)  // nothing to poll, or to abort
    fail(w, ": ", result == ncclSuccess || result == ncclInProgress ? std::string("NCCL made no communicator")
                                                                    : nccl_error(nullptr, result));
  result = outcome(comm, result, deadline);
  if (result == ncclSuccess) return;
  std::string error = result == ncclInProgress ? "" : nccl_error(comm, result);
  ncclCommAbort(comm);  // not null: checked above
  if (result == ncclInProgress)
    throw TimeoutError(w + ": timed out after " + seconds_str(deadline.timeout()) + " (did every rank start?)");
  fail(w, ": ", error);
}

void check_devices(const std::vector<Device>& devices, const std::string& w) {
  for (Device d : devices) cuda::check_gpu(w.c_str(), d);
}

}  // namespace

bool nccl_available() { return true; }

int nccl_version() {
  int version = 0;
  BRIGADE_NCCL_CHECK(ncclGetVersion(&version));
  return version;
}

bool nccl_multi_rank_per_gpu() { return nccl_version() >= 23003; }

std::unique_ptr<Communicator> nccl_communicator(std::shared_ptr<Store> store, int rank, int size, Device device,
                                                Milliseconds timeout, std::optional<Milliseconds> connect_within) {
  std::string w =
      "comm nccl: creating rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + device.str();
  BRIGADE_CHECK(store != nullptr, w, ": a store is needed for the rendezvous");
  BRIGADE_CHECK(rank >= 0 && rank < size, w, ": the rank is outside the group");
  check_devices({device}, w);
  Deadline deadline = Deadline::after(connect_timeout(timeout, connect_within));
  // Every rank creates its communicators in the same order, so the n-th one agrees on its key.
  const std::string prefix = "nccl/" + std::to_string(communicators_created++);
  NcclPair comms;
  cuda::DeviceGuard guard(device.index);
  try {
    for (bool headers : {false, true}) {
      const std::string key = prefix + (headers ? "/header_id" : "/unique_id");
      ncclUniqueId id;
      if (rank == 0) {
        BRIGADE_NCCL_CHECK(ncclGetUniqueId(&id));
        store->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
      } else {
        std::string bytes = store->get(key, deadline);
        BRIGADE_CHECK(bytes.size() == sizeof id, w, ": the unique id in ", store->str(), " has ", bytes.size(),
                      " bytes, expected ", sizeof id);
        std::memcpy(&id, bytes.data(), sizeof id);
      }
      ncclConfig_t config = headers ? header_config() : nonblocking_config();
      ncclComm_t comm = nullptr;
      // Two statements: `comm` must be read after the call has written it (argument order is unspecified).
      ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
      settle(comm, started, deadline, w + (headers ? " (its header communicator)" : ""));  // aborts it on failure
      (headers ? comms.headers : comms.data) = comm;
    }
  } catch (...) {
    if (comms.data != nullptr) ncclCommAbort(comms.data);  // the first, when the second failed
    throw;
  }
  return std::make_unique<NcclCommunicator>(comms, rank, size, device, timeout);
}

std::vector<std::unique_ptr<Communicator>> nccl_group(const std::vector<Device>& devices, Milliseconds timeout) {
  std::string w = "comm nccl_group of " + std::to_string(devices.size()) + " ranks";
  BRIGADE_CHECK(!devices.empty(), w, ": at least one rank is needed");
  check_devices(devices, w);
  bool shared = false;
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j) shared = shared || devices[i] == devices[j];
  if (shared) {
    int version = nccl_version();
    BRIGADE_CHECK(version >= 23003, w, ": several ranks on one GPU need NCCL >= 2.30.3, the loaded library is ",
                  version / 10000, ".", version / 100 % 100, ".", version % 100);
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // 0: a user's explicit setting wins
  }
  Deadline deadline = Deadline::after(timeout);
  int n = int(devices.size());
  // [0] data, [1] headers (NcclPair), each initialised as one group, so that initialising rank 0
  // does not wait for rank 1 that this thread has not started yet.
  std::vector<ncclComm_t> comms[2] = {std::vector<ncclComm_t>(size_t(n), nullptr),
                                      std::vector<ncclComm_t>(size_t(n), nullptr)};
  std::vector<ncclResult_t> started[2] = {std::vector<ncclResult_t>(size_t(n), ncclSuccess),
                                          std::vector<ncclResult_t>(size_t(n), ncclSuccess)};
  auto abort_all = [&] {
    for (auto& list : comms)
      for (ncclComm_t& comm : list)
        if (comm != nullptr) ncclCommAbort(comm), comm = nullptr;
  };
  try {
    for (int k = 0; k < 2; ++k) {
      ncclUniqueId id;
      BRIGADE_NCCL_CHECK(ncclGetUniqueId(&id));
      ncclConfig_t config = k == 1 ? header_config() : nonblocking_config();
      BRIGADE_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < n; ++r) {
        cuda::DeviceGuard guard(devices[size_t(r)].index);
        started[k][size_t(r)] = ncclCommInitRankConfig(&comms[k][size_t(r)], n, id, r, &config);
      }
      ncclResult_t ended = ncclGroupEnd();
      if (ended != ncclInProgress) BRIGADE_NCCL_CHECK(ended);
      for (int r = 0; r < n; ++r) {
        ncclComm_t comm = comms[k][size_t(r)];
        comms[k][size_t(r)] = nullptr;  // settle() aborts it on failure
        settle(comm, started[k][size_t(r)], deadline,
               w + ", rank " + std::to_string(r) + (k == 1 ? " (its header communicator)" : ""));
        comms[k][size_t(r)] = comm;
      }
    }
  } catch (...) {
    abort_all();
    throw;
  }
  std::vector<std::unique_ptr<Communicator>> result;
  try {
    for (int r = 0; r < n; ++r) {
      NcclPair pair{comms[0][size_t(r)], comms[1][size_t(r)]};
      comms[0][size_t(r)] = comms[1][size_t(r)] = nullptr;  // the communicator owns them now
      result.push_back(std::make_unique<NcclCommunicator>(pair, r, n, devices[size_t(r)], timeout));
    }
  } catch (...) {
    abort_all();  // the ranks not yet handed over
    throw;
  }
  return result;
}

}  // namespace brigade::comm
