// Communicator: one interface for moving tensors between the ranks of a group, whatever carries them.
//
// A pipeline stage sends activations to its successor and receives gradients from it; data-parallel
// replicas average gradients. Those few verbs are all it needs, and they should not change when the
// stages move from threads of one process (local), to processes on CPUs (gloo), to GPUs (nccl):
//
//   auto comm = comm::connect();                   // from the launcher's environment (comm/connect.h)
//   if (comm->rank() == 0) comm->send(x, 1);
//   else Tensor x = comm->recv(0);                // shape and dtype come with the message
//
// Grouped sends and receives. A stage in the middle of a pipeline sends to its successor while it
// receives from its predecessor. Done one after the other with blocking calls, every stage can end
// up sending while its peer also sends and nobody receives: a deadlock. exchange() posts a batch of
// sends and receives together and waits for all of them, so each transfer can complete as soon as
// its peer posts the matching half, in whatever order the peers got there:
//
//   std::vector<P2P> ops = {P2P::send(y, next), P2P::recv(prev)};
//   comm->exchange(ops);
//   Tensor x = ops[1].tensor;
//
// Tags keep streams of messages apart (say, activations and gradients); messages with the same
// (sender, receiver, tag) arrive in the order they were sent.
//
// Devices. Tensors must live on the communicator's device(): the CPU for gloo, the communicator's GPU
// for nccl; local communicators have one device per rank. On GPUs every call is stream-ordered: it
// waits for work already queued on the current stream before reading a tensor, and work queued after
// it sees the received data — the host does not wait for the transfer.
//
// Failure. Every blocking call has a deadline (timeout(), default BRIGADE_COMM_TIMEOUT). When a call
// times out or a peer fails, the error names the operation, the peer and the tag, and the
// communicator is aborted: every later call, and every peer waiting on this rank, fails promptly
// instead of hanging. Argument errors found before anything moved (a bad peer, a tensor on the
// wrong device) throw without aborting.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/handshake.h"
#include "comm/timeout.h"
#include "core/error.h"
#include "core/tensor.h"

namespace brigade::comm {

// Thrown when a deadline passes; also a brigade::Error.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// Thrown by a call that ended because the group was aborted — by abort() on this rank (another
// thread's, a runner's), by a failure of another call, or at a peer (a closed connection) — not by a
// fault of its own. A runner of ranks (comm/local_ranks.h) tells a rank's own failure from the
// consequences of another's by this type, never by the words of a message.
class AbortedError : public Error {
 public:
  using Error::Error;
};

enum class ReduceOp { sum, average };

// One send or receive of a batch (Communicator::exchange).
struct P2P {
  enum class Kind : uint8_t { send, recv };
  Kind kind = Kind::send;
  int peer = -1;
  int tag = 0;
  Tensor tensor;  // send: the data. recv: where to put it; when undefined, exchange() fills in a new tensor
  Shapes shapes = Shapes::fixed;

  static P2P send(const Tensor& t, int peer, int tag = 0, Shapes shapes = Shapes::fixed) {
    return {Kind::send, peer, tag, t, shapes};
  }
  static P2P recv(int peer, int tag = 0, Shapes shapes = Shapes::fixed) { return {Kind::recv, peer, tag, {}, shapes}; }
  static P2P recv_into(const Tensor& out, int peer, int tag = 0, Shapes shapes = Shapes::fixed) {
    return {Kind::recv, peer, tag, out, shapes};
  }
};

// A directed link between two ranks of a communicator: `from` sends to `to` (Communicator::connect).
struct Link {
  int from = 0;
  int to = 0;
};

// A collective a communicator will run (Communicator::connect_collectives): an all-reduce of
// `numel` elements of `dtype` with `op`, or a broadcast of them.
struct CollectiveUse {
  enum class Kind { all_reduce, broadcast };
  Kind kind = Kind::all_reduce;
  int64_t numel = 1;
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;  // all-reduce only
  static CollectiveUse all_reduce(int64_t numel, DType dtype, ReduceOp op) {
    return {Kind::all_reduce, numel, dtype, op};
  }
  static CollectiveUse broadcast(int64_t numel, DType dtype) { return {Kind::broadcast, numel, dtype, ReduceOp::sum}; }
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  Device device() const { return device_; }
  const std::string& backend() const { return backend_; }  // "local", "gloo", "nccl"
  Milliseconds timeout() const { return timeout_; }
  void set_timeout(Milliseconds timeout);
  // True when a send completes before its receiver posts the matching receive (the local backend's
  // mailboxes). gloo and NCCL may hold a send until the peer receives — rendezvous — so code that
  // sends and receives in separate calls must make sure no two ranks wait on each other that way
  // (pipeline/exchange.h proves it for a schedule).
  virtual bool queues_sends() const { return false; }
  // True when the transport pairs the messages between two ranks by their order rather than by tag,
  // and runs each batch on a stream while the host goes on (NCCL): a message queued behind one its
  // peer has not posted yet waits for it, and a host that reads data it received may wait there.
  // Code that sends and receives in separate calls must order them for it (pipeline/exchange.h).
  virtual bool matches_messages_in_order() const { return false; }

  // ---- point to point ----
  // send() returns once the tensor may be dropped (gloo: the bytes are out; nccl: the transfer is
  // queued on the communicator's stream, which keeps the tensor alive until it is done; local: the
  // tensor is in the receiver's mailbox). Don't modify a sent tensor in place afterwards: local
  // hands the very tensor over (comm/local.h), and NCCL may still be reading it (the caller's
  // stream waits for an exchange only when it receives something). recv() blocks until the
  // message is in.
  void send(const Tensor& t, int peer, int tag = 0, Shapes shapes = Shapes::fixed);
  Tensor recv(int peer, int tag = 0, Shapes shapes = Shapes::fixed);
  void recv_into(const Tensor& out, int peer, int tag = 0, Shapes shapes = Shapes::fixed);
  // Runs all of `ops` together (see above); received tensors land in ops[i].tensor.
  void exchange(std::vector<P2P>& ops);

  // ---- collectives: every rank of the group calls them, in the same order ----
  // Connects `links` now — every link any rank will send on, the same list on every rank — on a
  // transport that would otherwise connect a link at its first use and make the host wait there for
  // the peer: NCCL (docs/comm.md), where two ranks that each wait, at a link's first use, for a group
  // the other issues only later would wait for ever. The other transports need nothing. A link from a
  // rank to itself is left out; so are repeats.
  void connect(std::vector<Link> links);
  // The same for collectives: runs each of `uses` once now — the same list on every rank — on a
  // transport whose collectives connect at their first use (NCCL: per algorithm, which it picks by
  // the kind, size, type and operation, so the uses should be the very calls to come), where the
  // first one makes the host wait inside the call until every rank reaches it. After this, those
  // calls never wait on the host: an all_reduce_async started mid-backward stays asynchronous
  // from the first step. The other transports need nothing. Repeats are left out.
  void connect_collectives(std::vector<CollectiveUse> uses);
  // In place; every rank ends with bitwise the same values. average divides by size() (floating
  // dtypes only).
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
  // The same, started now and finished later: on a transport that overlaps collectives with compute
  // (overlaps_collectives(): NCCL) it runs on the communicator's stream while the caller's stream
  // goes on, and PendingReduce::wait() makes the caller's stream wait for it (the host never
  // blocks). Elsewhere it is done before this returns. `t` must be contiguous; neither read nor
  // write it until wait(). Every rank starts its reductions in the same order, as for all_reduce.
  class PendingReduce {
   public:
    PendingReduce() = default;
    explicit PendingReduce(std::function<void()> wait) : wait_(std::move(wait)) {}
    void wait();  // idempotent
   private:
    std::function<void()> wait_;
  };
  PendingReduce all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::sum);
  virtual bool overlaps_collectives() const { return false; }
  void broadcast(const Tensor& t, int root);  // in place: every rank ends with root's values
  void barrier();
  // Splits the group like MPI_Comm_split: ranks passing the same color form a new group, ordered by
  // (key, rank). Every rank calls it; a rank passing color < 0 joins none and gets nullptr. E.g. with
  // `stages` pipeline stages and several replicas: split(stage, replica) groups one stage's replicas
  // for gradient averaging.
  std::unique_ptr<Communicator> split(int color, int key = 0);

  // Stops every pending and future call with an Error mentioning `reason`, here and (as far as the
  // transport allows) at the peers. Idempotent; safe from another thread.
  void abort(const std::string& reason);
  bool aborted() const;

 protected:
  Communicator(std::string backend, int rank, int size, Device device, Milliseconds timeout);

  // ---- what a backend implements; arguments are checked, the deadline started ----
  // One transfer of a batch: the op plus whether its message carries a header (see handshake.h).
  struct Transfer {
    P2P* op;
    bool header;
    std::string what;  // "comm recv from rank 0, tag 5 (rank 1 of 2, gloo)", for errors
  };
  virtual void run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) = 0;
  virtual void run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) = 0;
  // Starts the reduction; returns what makes the caller's stream wait for it (empty: done already).
  virtual std::function<void()> run_all_reduce_async(const Tensor& t, ReduceOp op, const Deadline& deadline) {
    run_all_reduce(t, op, deadline);
    return {};
  }
  virtual void run_broadcast(const Tensor& t, int root, const Deadline& deadline) = 0;
  virtual void run_barrier(const Deadline& deadline) = 0;
  // `links`: checked, without self-links or repeats, in the same order on every rank.
  virtual void run_connect(const std::vector<Link>& links, const Deadline& deadline) {
    (void)links;
    (void)deadline;
  }
  // `uses`: checked, without repeats, in the same order on every rank.
  virtual void run_connect_collectives(const std::vector<CollectiveUse>& uses, const Deadline& deadline) {
    (void)uses;
    (void)deadline;
  }
  // `members`: the new group's ranks (in this group), in their new order; this rank is among them.
  virtual std::unique_ptr<Communicator> run_split(int color, int key, const std::vector<int>& members,
                                                  const Deadline& deadline) = 0;
  // Make peers' pending calls fail too, if the transport can (close connections, ncclCommAbort).
  virtual void abort_transport(const std::string& reason) = 0;

  // ---- helpers for backends ----
  // The handshake hooks (handshake.h): a header arrived for a receive, or a receive has none. Both
  // check the receiver's expectation and throw naming both sides when it is not met.
  void on_header(const Transfer& t, const TensorMeta& sent);
  const TensorMeta& without_header(const Transfer& t) const;
  // A receive without a header whose sender's tensor is at hand (handed over in memory): also checks
  // what a wire would garble silently — the sender's channel kind, and a preset receive's tensor.
  void without_header_in_memory(const Transfer& t, const TensorMeta& sent) const;
  // Gives a receive without a destination a new tensor of `meta` on device().
  void allocate_destination(P2P& op, const TensorMeta& meta) const;
  // "rank 1 of 4, gloo": who is speaking, for every message.
  std::string where() const;
  // The description used by errors for an operation: "comm all_reduce (rank 1 of 4, gloo)".
  std::string what(const std::string& op) const;
  // Throws the TimeoutError for `what`, after aborting this communicator.
  [[noreturn]] void fail_timeout(const std::string& what, const Deadline& deadline, const std::string& detail = "");

 private:
  void check_usable(const std::string& what) const;
  void check_peer(int peer, const std::string& what) const;
  void check_tensor(const Tensor& t, const std::string& what) const;
  // Runs a transport call: any failure aborts the communicator (its message sequences can no longer
  // be trusted) and propagates.
  template <class Fn> void guarded(Fn&& fn);

  std::string backend_;
  int rank_;
  int size_;
  Device device_;
  Milliseconds timeout_;
  Handshake handshake_;
  struct AbortState;
  std::shared_ptr<AbortState> abort_;
};

}  // namespace brigade::comm
