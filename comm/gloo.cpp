#include "comm/gloo.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::comm {

namespace {

using GlooBuffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

// Gloo's store interface over ours: keys live under `prefix` (one per group, so groups never
// collide), and every wait ends at `deadline` instead of gloo's fixed default.
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(std::shared_ptr<comm::Store> store, std::string prefix, const Deadline& deadline)
      : store_(std::move(store)), prefix_(std::move(prefix)), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(prefix_ + key, std::string(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    std::string value = fetch(key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& key : keys) fetch(key);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  // Gloo's full-mesh connect publishes each rank's address under the rank's number, so a key that
  // never appears means that rank never got this far: say so in those words.
  std::string fetch(const std::string& key) {
    try {
      return store_->get(prefix_ + key, deadline_);
    } catch (const TimeoutError& e) {
      const bool is_rank =
          !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!is_rank) throw;
      throw TimeoutError("rank " + key + " never published its address (did it start, with the same store and " +
                         "group size?): " + e.what());
    }
  }

  std::shared_ptr<comm::Store> store_;
  std::string prefix_;
  Deadline deadline_;
};

// Every rank publishes "arrived/<rank>" and waits for everyone else's: after this, every rank of the
// group is up and inside its connect, so what remains is quick unless a rank dies meanwhile. The
// wait for a slow starter happens here, where our deadline bounds it, instead of inside gloo.
void meet_everyone(Store& store, const std::string& prefix, int rank, int size, const Deadline& deadline) {
  store.set(prefix + "arrived/" + std::to_string(rank), "");
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    try {
      store.get(prefix + "arrived/" + std::to_string(r), deadline);
    } catch (const TimeoutError& e) {
      throw TimeoutError("rank " + std::to_string(r) + " never arrived (did it start, with the same store and " +
                         "group size?): " + e.what());
    }
  }
}

// Gloo's full-mesh connect, bounded. This gloo waits up to 5x its timeout for a peer's initial
// connect, pair after pair, and cannot be interrupted; so its timeout is a fifth of what is left,
// and the call runs on a thread of its own that is abandoned if it still has not returned when the
// deadline (plus a moment) passes — it then ends by itself when gloo gives up. The thread owns
// everything it touches, so abandoning it leaves nothing dangling. (If the process exits with the
// error meanwhile, the thread may still be inside gloo while static destructors run: the price of
// a bound on a call that offers none, paid only when a peer is already lost.)
void connect_full_mesh(const std::shared_ptr<gloo::rendezvous::Context>& context,
                       const std::shared_ptr<StoreAdapter>& adapter,
                       const std::shared_ptr<gloo::transport::Device>& device, const Deadline& deadline) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::exception_ptr error;
  };
  auto outcome = std::make_shared<Outcome>();
  context->setTimeout(std::max(Milliseconds(1), deadline.remaining() / 5));
  std::thread([context, adapter, device, outcome] {
    std::exception_ptr error;
    try {
      auto dev = device;
      context->connectFullMesh(*adapter, dev);
    } catch (...) {
      error = std::current_exception();
    }
    // The error is moved, never copied, here and by the waiter, so that after the hand-over under
    // the mutex one thread alone holds the exception (the waiter; this thread when the waiter has
    // given up). An exception_ptr's count lives in libstdc++, which ThreadSanitizer does not see:
    // two threads releasing one exception would be reported as a race on its free.
    std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->error = std::move(error);
    outcome->done = true;
    outcome->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mutex);
  if (!outcome->done_cv.wait_until(lock, deadline.at() + std::chrono::seconds(1), [&] { return outcome->done; }))
    throw TimeoutError("timed out after " + seconds_str(deadline.timeout()) +
                       ": gloo's connect did not return (abandoned; a peer may have died or be unreachable)");
  if (std::exception_ptr error = std::move(outcome->error)) std::rethrow_exception(error);
}

// Gloo's collectives use slots whose top byte is 0x01..0x08; point-to-point uses 0x42, then the tag,
// then whether the message is a header (0) or data (1).
uint64_t slot(int tag, bool data) { return uint64_t(0x42) << 56 | uint64_t(uint32_t(tag)) << 24 | (data ? 1 : 0); }

template <class T>
gloo::AllreduceOptions::Func sum_of() {
  return static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>);
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<Store> store, std::string prefix, std::shared_ptr<gloo::transport::Device> device,
                   int rank, int size, Milliseconds timeout, const Deadline& deadline)
      : Communicator("gloo", rank, size, Device::cpu(), timeout),
        store_(std::move(store)),
        prefix_(std::move(prefix)),
        device_(std::move(device)) {
    context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
    std::string w = what("connect through " + store_->str());
    try {
      meet_everyone(*store_, prefix_, rank, size, deadline);
      connect_full_mesh(context_, std::make_shared<StoreAdapter>(store_, prefix_, deadline), device_, deadline);
    } catch (const TimeoutError& e) {
      throw TimeoutError(w + ": " + e.what());
    } catch (const std::exception& e) {
      // Past the deadline, whatever gloo said is reported as a timeout, keeping its words (and there
      // is nothing to abort yet).
      if (deadline.passed())
        throw TimeoutError(w + ": timed out after " + seconds_str(deadline.timeout()) + " (" + e.what() + ")");
      fail(w, ": ", e.what());
    }
    context_->setTimeout(timeout);
  }

 protected:
  void run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) override {
    exchange_with_self(transfers);
    Batch batch;
    batch.headers.resize(transfers.size());
    try {
      post_and_wait(transfers, batch, deadline);
    } catch (...) {
      // A failed exchange leaves buffers posted that gloo's device thread may still be completing or
      // failing (a dead peer's pair signals every buffer pending on it). ~UnboundBuffer waits for
      // that thread by spinning on a reference count inside libgloo, an order ThreadSanitizer cannot
      // see: it reported the freed buffer's condition variable as raced by the thread's signal.
      // Closing the connections first takes each pair's mutex, under which the device thread does
      // all its work with a buffer, and stops it touching them again: the same order, made by a
      // lock. The failed call aborts the communicator next (Communicator::guarded), which would
      // close them anyway.
      close_connections();
      throw;
    }
  }

  void run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) override {
    if (is_half(t.dtype())) {
      // gloo has no bf16 arithmetic: reduce in f32 (also more accurate), round once at the end.
      Tensor wide = ops::to_dtype(t, DType::f32);
      run_all_reduce(wide, op, deadline);
      ops::copy_(t, wide);
      return;
    }
    gloo::AllreduceOptions opts(context_);
    opts.setTimeout(deadline.remaining());
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> ||
                    std::is_same_v<T, int64_t>) {
        opts.setOutput(t.data<T>(), size_t(t.numel()));
        opts.setReduceFunction(sum_of<T>());
      }
    });
    collective(what("all_reduce"), deadline, [&] { gloo::allreduce(opts); });
    if (op == ReduceOp::average) ops::scale_(t, 1.0 / size());
  }

  void run_broadcast(const Tensor& t, int root, const Deadline& deadline) override {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(t.raw_data()), t.nbytes());  // bytes: no arithmetic involved
    opts.setRoot(root);
    opts.setTimeout(deadline.remaining());
    collective(what("broadcast from rank " + std::to_string(root)), deadline, [&] { gloo::broadcast(opts); });
  }

  void run_barrier(const Deadline& deadline) override {
    gloo::BarrierOptions opts(context_);
    opts.setTimeout(deadline.remaining());
    collective(what("barrier"), deadline, [&] { gloo::barrier(opts); });
  }

  std::unique_ptr<Communicator> run_split(int color, int, const std::vector<int>& members,
                                          const Deadline& deadline) override {
    // Every rank counts its splits alike, so the members of one color agree on the store prefix.
    std::string prefix = prefix_ + "split" + std::to_string(splits_++) + "." + std::to_string(color) + "/";
    if (members.empty()) return nullptr;
    int index = int(std::find(members.begin(), members.end(), rank()) - members.begin());
    return std::make_unique<GlooCommunicator>(store_, prefix, device_, index, int(members.size()), timeout(),
                                              deadline);
  }

  void abort_transport(const std::string&) override {
    {
      // A wait of this rank's own (an abort from another thread) is not woken by closing the
      // sockets below: gloo has it end only by its timeout, unless told.
      std::lock_guard<std::mutex> lock(waiting_mutex_);
      if (waiting_ != nullptr) {
        waiting_->abortWaitRecv();
        waiting_->abortWaitSend();
      }
    }
    close_connections();
  }

 private:
  struct Posted {
    GlooBuffer buffer;
    const Transfer* transfer;
  };

  // One exchange's buffers posted to gloo, and the headers some of them point into (declared first,
  // so freed after the buffers).
  struct Batch {
    std::vector<WireHeader> headers;
    std::vector<Posted> sends, header_recvs, data_recvs;
  };

  void post_and_wait(std::vector<Transfer>& transfers, Batch& batch, const Deadline& deadline) {
    auto& [headers, sends, header_recvs, data_recvs] = batch;
    // Gloo's sends complete only once the receiver has posted the matching receive, so nothing a
    // send needs may wait for anything a receive needs — or two ranks, each sending what the other
    // receives later, wait for each other (a naive or GPipe pipeline would hang on its first
    // step). So every send, header and data, is posted at once; a receive with a header posts its
    // data receive as soon as that header is in. Headers and data travel in separate slots, so the
    // order they are posted in does not change which message meets which receive.
    std::vector<size_t> header_of;  // header_recvs[k] belongs to transfers[header_of[k]]
    for (size_t i = 0; i < transfers.size(); ++i) {
      Transfer& t = transfers[i];
      if (t.op->peer == rank()) continue;
      if (t.op->kind == P2P::Kind::send) {
        if (t.header) {
          headers[i] = encode_header(TensorMeta::of(t.op->tensor, t.op->shapes));
          post(sends, t, &headers[i], sizeof(WireHeader), slot(t.op->tag, false));
        }
        if (t.op->tensor.nbytes() > 0)
          post(sends, t, t.op->tensor.raw_data(), t.op->tensor.nbytes(), slot(t.op->tag, true));
      } else if (t.header) {
        post(header_recvs, t, &headers[i], sizeof(WireHeader), slot(t.op->tag, false));
        header_of.push_back(i);
      } else {
        allocate_destination(*t.op, without_header(t));  // the channel's agreed tensor
        post_data_recv(data_recvs, t);
      }
    }
    // Each header in turn: check it, allocate the destination, post the data receive.
    for (size_t k = 0; k < header_recvs.size(); ++k) {
      const size_t i = header_of[k];
      Transfer& t = transfers[i];
      wait_one(header_recvs[k], deadline);
      TensorMeta sent = decode_header(headers[i], "rank " + std::to_string(t.op->peer));
      on_header(t, sent);
      allocate_destination(*t.op, sent);
      post_data_recv(data_recvs, t);
    }
    for (Posted& p : data_recvs) wait_one(p, deadline);
    for (Posted& p : sends) wait_one(p, deadline);
  }

  void post(std::vector<Posted>& posted, const Transfer& t, void* data, size_t nbytes, uint64_t slot) {
    try {
      GlooBuffer buffer = context_->createUnboundBuffer(data, nbytes);
      if (t.op->kind == P2P::Kind::send) buffer->send(t.op->peer, slot);
      else buffer->recv(t.op->peer, slot);
      posted.push_back({std::move(buffer), &t});
    } catch (const std::exception& e) {
      fail_broken(e,
                  t.what + ": the connection to rank " + std::to_string(t.op->peer) + " is broken (" + e.what() + ")");
    }
  }

  void post_data_recv(std::vector<Posted>& posted, const Transfer& t) {
    if (t.op->tensor.nbytes() > 0)
      post(posted, t, t.op->tensor.raw_data(), t.op->tensor.nbytes(), slot(t.op->tag, true));
  }

  void wait_one(Posted& p, const Deadline& deadline) {
    const Transfer& t = *p.transfer;
    {
      // Registered where abort_transport can interrupt it; an abort that came first is seen here.
      std::lock_guard<std::mutex> lock(waiting_mutex_);
      if (aborted()) throw AbortedError(t.what + ": the communicator was aborted");
      waiting_ = p.buffer.get();
    }
    bool completed = false;
    try {
      completed = t.op->kind == P2P::Kind::send ? p.buffer->waitSend(deadline.remaining())
                                               : p.buffer->waitRecv(deadline.remaining());
    } catch (const std::exception& e) {
      stop_waiting();
      if (deadline.passed()) fail_timeout(t.what, deadline);
      fail_broken(e, t.what + ": the connection to rank " + std::to_string(t.op->peer) + " failed (" + e.what() +
                         "); did that rank exit or abort?");
    }
    stop_waiting();
    if (!completed && aborted()) throw AbortedError(t.what + ": the communicator was aborted while waiting");
    BRIGADE_CHECK(completed, t.what, ": interrupted");
  }

  // Closing the sockets makes every peer's pending operation with this rank fail at once. Gloo's
  // Pair::close does nothing to a closed pair; it throws only if epoll refuses, and then there is
  // nothing better to do (the communicator is unusable either way).
  void close_connections() noexcept {
    try {
      context_->closeConnections();
    } catch (...) {
    }
  }

  void stop_waiting() {
    std::lock_guard<std::mutex> lock(waiting_mutex_);
    waiting_ = nullptr;
  }

  template <class Fn>
  void collective(const std::string& w, const Deadline& deadline, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      if (deadline.passed()) fail_timeout(w, deadline);
      fail_broken(e, w + ": " + e.what() + " (did a rank exit or abort?)");
    }
  }

  // A connection that broke — a peer closed it (it exited or aborted), or this rank's abort did — is
  // the consequence of a failure elsewhere: an AbortedError, so a runner of ranks looks further for
  // the cause. gloo's other errors are this call's own.
  [[noreturn]] void fail_broken(const std::exception& e, const std::string& message) {
    if (aborted() || dynamic_cast<const gloo::IoException*>(&e) != nullptr) throw AbortedError(message);
    fail(message);
  }

  // Gloo has no pair from a rank to itself; a message to oneself is a copy through a queue (sends
  // first, so a batch may hold both halves).
  void exchange_with_self(std::vector<Transfer>& transfers) {
    for (Transfer& t : transfers)
      if (t.op->peer == rank() && t.op->kind == P2P::Kind::send)
        to_self_[t.op->tag].push_back({ops::clone(t.op->tensor), t.op->shapes});
    for (Transfer& t : transfers) {
      if (t.op->peer != rank() || t.op->kind != P2P::Kind::recv) continue;
      auto& queue = to_self_[t.op->tag];
      BRIGADE_CHECK(!queue.empty(), t.what, ": nothing was sent to itself on this tag (a rank's send to itself must ",
                    "come before its receive, or in the same batch)");
      auto [tensor, shapes] = std::move(queue.front());
      queue.pop_front();
      if (t.header) on_header(t, TensorMeta::of(tensor, shapes));
      else without_header_in_memory(t, TensorMeta::of(tensor, shapes));
      if (t.op->tensor.defined()) ops::copy_(t.op->tensor, tensor);
      else t.op->tensor = tensor;
    }
  }

  std::shared_ptr<Store> store_;
  std::string prefix_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::map<int, std::deque<std::pair<Tensor, Shapes>>> to_self_;
  std::mutex waiting_mutex_;  // guards waiting_ against an abort from another thread
  gloo::transport::UnboundBuffer* waiting_ = nullptr;  // the buffer wait_one waits on, if any
  uint64_t splits_ = 0;
};

}  // namespace

bool gloo_available() { return true; }

std::unique_ptr<Communicator> gloo_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                const GlooOptions& options) {
  BRIGADE_CHECK(store != nullptr, "comm gloo: a store is needed for the rendezvous");
  gloo::transport::tcp::attr attr;
  if (!options.interface.empty()) attr.iface = options.interface;
  else attr.hostname = options.host;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    fail("comm gloo: cannot open a TCP device on ", options.interface.empty() ? options.host : options.interface,
         ": ", e.what());
  }
  const Deadline deadline = Deadline::after(connect_timeout(options.timeout, options.connect_timeout));
  return std::make_unique<GlooCommunicator>(std::move(store), "gloo/", std::move(device), rank, size, options.timeout,
                                            deadline);
}

}  // namespace brigade::comm
