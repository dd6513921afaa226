// The emulated NCCL's first-use link setup: a point-to-point link — a peer and a direction on one
// communicator — is connected the first time a group uses it, and so is a collective algorithm's
// set of links the first time a group runs a collective with it; the host waits for that.
//
// Source. Unlike the rest of the emulated NCCL, this does not come from the User Guide, which
// documents NCCL_RUNTIME_CONNECT (default 1 since 2.22: peers are connected at runtime, when first
// needed, instead of at init) but not what a first use costs the host. It follows NCCL's source,
// read for its behaviour (none of it copied): src/transport.cc, ncclTransportP2pConnect (a group's
// point-to-point calls mark the links not yet connected) and ncclTransportP2pSetup (run at the
// group's launch, before any of its kernels):
//  - per rank, every link its group's sends and receives use that is not connected yet is set up
//    (a rank's link to itself needs none). A non-blocking communicator does it in a background job:
//    ncclGroupEnd answers ncclInProgress, ncclCommGetAsyncError says ncclInProgress until it is done,
//    and other calls are refused meanwhile (kBusy); a blocking one's ncclGroupEnd waits for it. Each
//    communicator of a group has a job of its own, so one thread can drive several ranks in a group.
//  - round i = 1 .. n-1 pairs the rank with recvPeer = rank - i and sendPeer = rank + i (mod n),
//    under bootstrap tag i << 8. With two peers: the connection info of our receive goes to recvPeer
//    (if we receive from it), that of our send to sendPeer (if we send to it); then the info is taken
//    from sendPeer, then from recvPeer. When they are one peer (n = 2, or i = n/2), one message each
//    way carries both. A take waits, with no timeout, until the message of that (peer, tag) arrives;
//    one bigger than expected fails: "Message truncated : received X bytes instead of Y"
//    (ncclInternalError).
//  - then a second round of empty sync messages under tag (i << 8) + 128, in the same pattern; the
//    links are then connected for good.
// So a link connects only once the peer's group sets up the mirror direction; until then the host
// waits — and two ranks that each wait for a group the other issues only later wait for ever.
// Two groups that first use a link in different directions (both only sending, say) meet only
// where a round's two ends are one peer (n = 2, or distance n/2): there NCCL fails ("Message
// truncated") when their channel counts differ and goes on with the wrong connection info when
// they are equal (undefined). With n >= 3 at another distance each waits, under its own tag, for
// a message the other never sends: a wait in a cycle.
//
// Modelled: one channel per link direction (NCCL uses several per peer, as many on both sides, so
// only the ratio matters: sizes here count channels, not bytes); messages through the World's
// mailboxes, numbered per (from, to, tag) on both ends, so that a later setup's message meets a
// later take, as on NCCL's sockets. NCCL accepts a message smaller than expected (it reads
// min(received, expected) bytes and takes the zeroed rest of its buffer as connection info) and one
// of the right size that describes the wrong direction (one peer at both ends, both ranks only
// sending or only receiving); what follows is undefined, and both are reported as errors here. A
// take also ends when the peer aborts (ncclRemoteError), when this rank is aborted (no error: the
// communicator is gone), or after bootstrap_timeout_seconds() (ncclSystemError) where NCCL would
// wait for ever.
// Collectives (NCCL's src/enqueue.cc, ncclPrepareTasks; src/group.cc, ncclCollPreconnect and the
// group launch; src/transport/generic.cc): with NCCL_RUNTIME_CONNECT=1, the default, a
// communicator connects the channels of a collective algorithm the first time one of its groups
// runs a collective with that algorithm (comm->initAlgoChannels, marked while the group is
// prepared): ring for a ring, the tree's up and down links for a tree (NVLS, CollNet and PAT have
// setups of their own). That is the same link setup as above, on the ring's or tree's neighbours, run
// inside ncclGroupEnd after the group's point-to-point setup and before any of its kernels — so
// the host (or, non-blocking, the communicator's background job) waits there until those
// neighbours' groups reach the same first use. Which algorithm a collective takes, NCCL decides
// per call (enqueue.cc, topoGetAlgoInfo): it estimates each enabled (algorithm, protocol)'s time as
// a latency plus bytes over a bandwidth, from tables of the topology (src/graph/tuning.cc), and
// takes the fastest — on one node, tree or NVLS with the low-latency protocols for small
// all-reduces, ring with the simple protocol for large ones; broadcast and reduce always ring. The
// protocol needs no connection of its own (the connect is per algorithm). Modelled coarsely: an
// all-reduce of at most kTreeMaxBytes is a tree, anything larger and every other collective a
// ring; and the wait is for every rank of the communicator, not just the neighbours — for two
// ranks the same, for more a stricter wait, so a program this lets through cannot wait in a cycle
// on NCCL's. NCCL_RUNTIME_CONNECT=0 connects rings and trees during init instead (no first-use
// wait for collectives; point-to-point links still connect at first use).
//
// Not modelled: which algorithm NCCL really picks (it depends on the machine), NVLS and CollNet.
#include <cstdlib>

#include "emulator/nccl_internal.h"

namespace brigade::emu::nccl {

// The largest all-reduce the model runs as a tree (a coarse stand-in for NCCL's tuning model).
constexpr uint64_t kTreeMaxBytes = 64 * 1024;

std::string algorithm_name(Algorithm algorithm) { return algorithm == Algorithm::ring ? "ring" : "tree"; }

Algorithm algorithm_of(const CallArgs& args) {
  if (args.kind == Kind::all_reduce && args.count * dtype_size(args.dtype) <= kTreeMaxBytes) return Algorithm::tree;
  return Algorithm::ring;
}

bool runtime_connect() {
  const char* value = std::getenv("NCCL_RUNTIME_CONNECT");
  return value == nullptr || std::string(value) != "0";
}

namespace {

// What a rank's setup does with its link to one peer.
struct Use {
  bool send = false;
  bool recv = false;
  int channels() const { return int(send) + int(recv); }
};

std::string use_text(Use use) {
  if (use.send && use.recv) return "sets up sending and receiving";
  if (use.send) return "sets up only sending";
  if (use.recv) return "sets up only receiving";
  return "sets up nothing";
}

constexpr int kSyncTag = 128;
// The collectives' connections use tags of their own, one per algorithm, beyond the rounds' i << 8.
constexpr int kCollectiveTag = 1 << 30;

class Setup {
 public:
  Setup(std::shared_ptr<Rank> rank, Connect what)
      : rank_(std::move(rank)), send_(std::move(what.send)), recv_(std::move(what.recv)),
        algorithms_(std::move(what.algorithms)) {}

  // True once every link and algorithm is connected; false when it failed (the rank's error says
  // why) or the rank was aborted. Point-to-point first, as NCCL's group launch does.
  bool run() { return run_links() && run_algorithms(); }

 private:
  // Every rank posts to every other and takes from every other, per algorithm (the file comment
  // says why every rank rather than the ring's or tree's neighbours).
  bool run_algorithms() {
    const int n = rank_->nranks, me = rank_->rank;
    for (int a = 0; a < kAlgorithms; ++a) {
      if (!algorithms_[size_t(a)]) continue;
      const int tag = kCollectiveTag + a;
      for (int peer = 0; peer < n; ++peer)
        if (peer != me) post(peer, tag, {});
      const std::string what = "the " + algorithm_name(Algorithm(a)) +
                               " connection at the first collective of that algorithm, with rank ";
      Envelope ignored;
      for (int peer = 0; peer < n; ++peer)
        if (peer != me && !take(peer, tag, &ignored, what + std::to_string(peer))) return false;
    }
    return true;
  }

  bool run_links() {
    const int n = rank_->nranks, me = rank_->rank;
    for (int i = 1; i < n; ++i) {
      const int recv_peer = (me - i + n) % n, send_peer = (me + i) % n;
      const int tag = i << 8;
      if (send_peer == recv_peer) {  // one message each way, both directions' info
        const Use both = use(send_peer);
        if (both.channels() == 0) continue;
        post(send_peer, tag, both);
        Envelope got;
        if (!take(send_peer, tag, &got, waits(send_peer)) || !check(send_peer, both, got)) return false;
        continue;
      }
      if (recv_[size_t(recv_peer)]) post(recv_peer, tag, {false, true});
      if (send_[size_t(send_peer)]) post(send_peer, tag, {true, false});
      Envelope got;
      if (send_[size_t(send_peer)] &&
          (!take(send_peer, tag, &got, waits(send_peer)) || !check(send_peer, {true, false}, got)))
        return false;
      if (recv_[size_t(recv_peer)] &&
          (!take(recv_peer, tag, &got, waits(recv_peer)) || !check(recv_peer, {false, true}, got)))
        return false;
    }
    for (int i = 1; i < n; ++i) {
      const int recv_peer = (me - i + n) % n, send_peer = (me + i) % n;
      const int tag = (i << 8) + kSyncTag;
      const bool sends = send_[size_t(send_peer)] != 0, receives = recv_[size_t(recv_peer)] != 0;
      Envelope ignored;
      if (send_peer == recv_peer) {
        if (!sends && !receives) continue;
        post(send_peer, tag, {});
        if (!take(send_peer, tag, &ignored, waits(send_peer))) return false;
        continue;
      }
      if (sends) post(send_peer, tag, {});
      if (receives) post(recv_peer, tag, {});
      if (sends && !take(send_peer, tag, &ignored, waits(send_peer))) return false;
      if (receives && !take(recv_peer, tag, &ignored, waits(recv_peer))) return false;
    }
    std::lock_guard<std::mutex> lock(rank_->world->mutex);
    for (size_t peer = 0; peer < send_.size(); ++peer) {
      if (send_[peer]) rank_->send_connected[peer] = 1;
      if (recv_[peer]) rank_->recv_connected[peer] = 1;
    }
    rank_->world->bump();
    return true;
  }

  Use use(int peer) const { return {send_[size_t(peer)] != 0, recv_[size_t(peer)] != 0}; }

  static std::string key(int from, int to, int tag, uint64_t seq) {
    return "boot." + std::to_string(from) + "." + std::to_string(to) + "." + std::to_string(tag) + "." +
           std::to_string(seq);
  }

  // "the link setup with rank 1 (rank 0 sets up only receiving)", for reports.
  std::string waits(int peer) const {
    return "the link setup with rank " + std::to_string(peer) + " (rank " + std::to_string(rank_->rank) + " " +
           use_text(use(peer)) + ")";
  }

  // Sends our connection info for `use` (empty: a sync message) to `to`.
  void post(int to, int tag, Use use) {
    World& world = *rank_->world;
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(world.mutex);
      seq = rank_->boot_sent[{to, tag}]++;
    }
    Message message;
    message.envelope.kind = Kind::connect;
    message.envelope.count = uint64_t(use.channels());
    message.envelope.op = int32_t(use.send);
    message.envelope.root = int32_t(use.recv);
    nccl::post(world, rank_->rank, to, key(rank_->rank, to, tag, seq), std::move(message));
  }

  // Takes the next message from `from` under `tag`, waiting for it (`waits`: for what, in reports);
  // false (an error recorded unless
  // this rank was aborted) when it cannot come. While it waits the setup counts as a running task
  // of the rank and, when a pass finds nothing and the world has not changed, as a Waiter: a rank
  // waiting in a setup for a rank that itself waits is part of a deadlock, which check_deadlock
  // then names at once, as for the tasks' waits, instead of after bootstrap_timeout_seconds().
  bool take(int from, int tag, Envelope* got, const std::string& waiting_for) {
    World& world = *rank_->world;
    const std::string what = waiting_for + ", tag " + std::to_string(tag);
    Waiter waiter{rank_->rank, 0, what, from};
    uint64_t seq;
    {
      std::lock_guard<std::mutex> lock(world.mutex);
      seq = rank_->boot_taken[{from, tag}]++;
      rank_->connecting = what;
      ++rank_->running;
    }
    const std::string k = key(from, rank_->rank, tag, seq);
    const double limit = bootstrap_timeout_seconds();
    const auto start = std::chrono::steady_clock::now();
    Message message;
    bool arrived = false, gone = false;
    for (;;) {
      uint64_t seen;
      {
        std::lock_guard<std::mutex> lock(world.mutex);
        if (rank_->aborted) break;
        seen = world.generation;
      }
      arrived = fetch(world, from, rank_->rank, k, &message);
      if (!arrived) gone = peer_aborted(from);
      if (arrived || gone) break;
      std::unique_lock<std::mutex> lock(world.mutex);
      if (limit >= 0 && std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(limit)) break;
      if (world.generation != seen || rank_->aborted) continue;
      waiter.generation = seen;
      world.waiters.push_back(&waiter);
      check_deadlock(world);
      // Ranks of this process notify every change; files of other processes need a short nap.
      world.changed.wait_for(lock, std::chrono::milliseconds(world.all_local ? 100 : 2));
      world.waiters.erase(std::find(world.waiters.begin(), world.waiters.end(), &waiter));
    }
    std::lock_guard<std::mutex> lock(world.mutex);
    rank_->connecting.clear();
    --rank_->running;
    world.bump();  // ncclCommAbort waits for running to reach 0
    if (arrived) {
      *got = message.envelope;
      return true;
    }
    if (rank_->aborted) return false;
    if (gone)
      set_async_error(*rank_, ncclRemoteError,
                      "rank " + std::to_string(from) + " called ncclCommAbort while " + rank_->name() + " waited in " + what);
    else
      set_async_error(*rank_, ncclSystemError,
                      rank_->name() + ": " + what + " did not complete within " +
                          std::to_string(int(bootstrap_timeout_seconds())) +
                          " s: rank " + std::to_string(from) + " never set up its side (NCCL would wait for ever)");
    return false;
  }

  bool peer_aborted(int peer) {
    World& world = *rank_->world;
    {
      std::lock_guard<std::mutex> lock(world.mutex);
      if (world.peer_aborted[size_t(peer)]) return true;
      if (world.local[size_t(peer)]) return false;
    }
    return remote_aborted(world, peer);
  }

  // Whether the connection info that `peer` sent fits what we set up with it (`mine`); records the
  // error when not.
  bool check(int peer, Use mine, const Envelope& got) {
    const Use theirs{got.op != 0, got.root != 0};
    const int expected = mine.channels(), received = int(got.count);
    std::string problem;
    if (received > expected)
      problem = "Message truncated : received the connection info of " + std::to_string(received) +
                " channel(s) instead of " + std::to_string(expected);
    else if (received < expected)
      problem = "received the connection info of " + std::to_string(received) + " channel(s) where " +
                std::to_string(expected) + " were expected (NCCL reads what came and takes the zeroed rest as connection info: undefined)";
    else if (theirs.send != mine.recv || theirs.recv != mine.send)
      problem = "the connection info has the right size but describes the wrong direction (undefined in NCCL)";
    if (problem.empty()) return true;
    const std::string me = std::to_string(rank_->rank), them = std::to_string(peer);
    std::lock_guard<std::mutex> lock(rank_->world->mutex);
    set_async_error(*rank_, ncclInternalError,
                    "link setup between rank " + me + " and rank " + them + " on " + rank_->world->short_name() +
                        ": " + problem + ": rank " + me + "'s group " + use_text(mine) + " with rank " + them +
                        ", rank " + them + "'s group " + use_text(theirs) + " with rank " + me +
                        ". NCCL connects a link at its first use, and the two ranks' groups that set it up must "
                        "use it in mirrored directions (connect the links first, in matching groups)");
    return false;
  }

  std::shared_ptr<Rank> rank_;
  std::vector<char> send_, recv_, algorithms_;
};

}  // namespace

void start_connect(const std::shared_ptr<Rank>& rank, Connect what, const std::shared_ptr<Gate>& gate) {
  launch_job(rank, [rank, gate, what = std::move(what)] {
    const bool ok = Setup(rank, what).run();
    ncclResult_t error;
    {
      std::lock_guard<std::mutex> lock(rank->world->mutex);
      error = rank->error;
    }
    {
      std::lock_guard<std::mutex> lock(gate->mutex);
      --gate->pending;
      if (!ok && !gate->failed) {
        gate->failed = true;
        gate->error = error;
        gate->failed_rank = rank->name();
      }
    }
    gate->changed.notify_all();
  });
}

bool wait_for_gate(Rank& rank, const std::shared_ptr<Gate>& gate) {
  if (!gate) return true;
  World& world = *rank.world;
  bool failed;
  ncclResult_t error;
  std::string failed_rank;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(gate->mutex);
      // Bounded, to look at our own abort, which notifies our World, not the gate.
      gate->changed.wait_for(lock, std::chrono::milliseconds(5), [&] { return gate->pending == 0; });
      failed = gate->failed;
      error = gate->error;
      failed_rank = gate->failed_rank;
      if (gate->pending == 0) break;
    }
    std::lock_guard<std::mutex> lock(world.mutex);
    if (rank.aborted) return false;
  }
  std::lock_guard<std::mutex> lock(world.mutex);
  if (rank.aborted) return false;
  if (failed && rank.error == ncclSuccess)
    set_async_error(rank, error == ncclSuccess ? ncclSystemError : error,
                    "ncclGroupEnd on " + rank.name() + ": the link setup of " + failed_rank +
                        ", in the same group, did not complete, so none of the group's work was launched");
  return !failed;
}

}  // namespace brigade::emu::nccl
