// The emulated NCCL's collectives: ncclAllReduce, ncclBroadcast (and ncclBcast), ncclReduce,
// ncclAllGather, ncclReduceScatter.
//
// Written from the NCCL User Guide: "Collective Communication Functions" (API), "Collective
// Operations" (usage: what each computes, and where ranks' chunks go), "In-place Operations"
// (sendbuff == recvbuff, and for ncclAllGather/ncclReduceScatter the rank's own chunk of the
// larger buffer), and "Data Pointers" (device memory of the communicator's device).
//
// Every rank of the communicator calls the k-th collective with the same kind, count, datatype,
// operation and root. When its stream reaches the call, each rank sends every other rank what that
// rank needs of it, with its arguments, and copies what it needs of itself; once a rank has every
// contribution it checks the arguments agree (a difference is every rank's asynchronous error,
// naming both calls) and computes its result from the contributions in rank order — so every rank
// reduces the same bits the same way. Contributions are copies taken at the start, so in-place
// calls are safe. A collective completes only once every rank has contributed.
//
// Not modelled: ncclAlltoAll, ncclGather, ncclScatter, custom reduction ops.
#include <cstring>

#include "emulator/nccl_internal.h"
#include "emulator/runtime.h"

using namespace brigade::emu::nccl;

namespace brigade::emu::nccl {
namespace {

std::string key(uint64_t seq, int from, int to) {
  return "coll." + std::to_string(seq) + "." + std::to_string(from) + "." + std::to_string(to);
}

class CollectiveStep final : public Step {
 public:
  CollectiveStep(const Rank& rank, const CallArgs& args, uint64_t seq)
      : me_(rank.rank), n_(rank.nranks), args_(args), seq_(seq), parts_(size_t(n_)), have_(size_t(n_), 0) {}

  std::string start(Rank& rank) override {
    std::string fault = check_buffers(rank);
    if (!fault.empty()) return fault;
    for (int q = 0; q < n_; ++q) {
      if (q == me_) continue;
      Message message{envelope(), payload_for(q)};
      post(*rank.world, me_, q, key(seq_, me_, q), std::move(message));
    }
    parts_[size_t(me_)] = payload_for(me_);
    have_[size_t(me_)] = 1;
    return "";
  }

  StepResult poll(Rank& rank) override {
    bool moved = false;
    for (int q = 0; q < n_; ++q) {
      Message message;
      if (have_[size_t(q)] || !fetch(*rank.world, q, me_, key(seq_, q, me_), &message)) continue;
      moved = true;
      have_[size_t(q)] = 1;
      const Envelope mine = envelope();
      const Envelope& theirs = message.envelope;
      if (theirs.kind != mine.kind || theirs.count != mine.count || theirs.dtype != mine.dtype ||
          theirs.op != mine.op || theirs.root != mine.root) {
        done_ = true;
        return {true, ncclInvalidUsage, mismatch(rank, q, theirs)};
      }
      parts_[size_t(q)] = std::move(message.data);
    }
    if (std::all_of(have_.begin(), have_.end(), [](char c) { return c != 0; })) {
      compute();
      done_ = true;
    }
    return {moved || done_, ncclSuccess, ""};
  }

  bool done() const override { return done_; }

  std::string waits() const override {
    std::string missing;
    for (int q : awaited()) missing += (missing.empty() ? "" : ", ") + std::to_string(q);
    return describe(args_) + " for rank(s) " + missing;
  }

  std::vector<int> awaited() const override {
    std::vector<int> ranks;
    for (int q = 0; q < n_; ++q)
      if (!have_[size_t(q)]) ranks.push_back(q);
    return ranks;
  }

 private:
  size_t element() const { return dtype_size(args_.dtype); }
  bool rooted() const { return args_.kind == Kind::broadcast || args_.kind == Kind::reduce; }

  Envelope envelope() const {
    Envelope e;
    e.kind = args_.kind;
    e.dtype = int32_t(args_.dtype);
    e.count = args_.count;
    e.op = args_.kind == Kind::broadcast || args_.kind == Kind::all_gather ? 0 : int32_t(args_.op);
    e.root = rooted() ? args_.peer : 0;
    return e;
  }

  // Elements this rank reads from sendbuff and writes to recvbuff (0: the buffer is not used).
  size_t send_elements() const {
    if (args_.kind == Kind::broadcast && me_ != args_.peer) return 0;
    return args_.kind == Kind::reduce_scatter ? args_.count * size_t(n_) : args_.count;
  }
  size_t recv_elements() const {
    if (args_.kind == Kind::reduce && me_ != args_.peer) return 0;
    return args_.kind == Kind::all_gather ? args_.count * size_t(n_) : args_.count;
  }

  std::string check_buffers(const Rank& rank) const {
    const std::string what = describe(args_) + " on " + rank.name();
    const size_t in = send_elements() * element(), out = recv_elements() * element();
    std::string fault;
    if (in > 0) fault = brigade::emu::check_device_range(what + " (sendbuff)", args_.send, in, rank.device);
    if (fault.empty() && out > 0)
      fault = brigade::emu::check_device_range(what + " (recvbuff)", args_.recv, out, rank.device);
    return fault;
  }

  // What rank `q` needs of this rank's sendbuff, copied now (so in-place calls are safe).
  std::vector<char> payload_for(int q) const {
    const char* send = static_cast<const char*>(args_.send);
    const size_t bytes = args_.count * element();
    switch (args_.kind) {
      case Kind::broadcast:
        if (me_ != args_.peer) return {};
        break;
      case Kind::reduce:
        if (q != args_.peer) return {};
        break;
      case Kind::reduce_scatter:
        return std::vector<char>(send + size_t(q) * bytes, send + size_t(q + 1) * bytes);
      default: break;
    }
    return bytes == 0 ? std::vector<char>() : std::vector<char>(send, send + bytes);
  }

  void compute() {
    char* recv = static_cast<char*>(args_.recv);
    const size_t bytes = args_.count * element();
    std::vector<const char*> parts;
    for (const auto& part : parts_) parts.push_back(part.data());
    switch (args_.kind) {
      case Kind::all_reduce:
      case Kind::reduce_scatter: reduce(recv, parts, args_.count, args_.dtype, args_.op); break;
      case Kind::reduce:
        if (me_ == args_.peer) reduce(recv, parts, args_.count, args_.dtype, args_.op);
        break;
      case Kind::broadcast:
        if (bytes > 0) std::memcpy(recv, parts_[size_t(args_.peer)].data(), bytes);
        break;
      case Kind::all_gather:
        for (int q = 0; q < n_ && bytes > 0; ++q) std::memcpy(recv + size_t(q) * bytes, parts_[size_t(q)].data(), bytes);
        break;
      default: break;
    }
  }

  std::string mismatch(const Rank& rank, int q, const Envelope& theirs) const {
    CallArgs other;
    other.kind = theirs.kind;
    other.count = theirs.count;
    other.dtype = ncclDataType_t(theirs.dtype);
    other.op = ncclRedOp_t(theirs.op);
    other.peer = theirs.root;
    return "collective mismatch on " + rank.world->short_name() + " (collective #" + std::to_string(seq_) +
           "): rank " + std::to_string(me_) + " called " + describe(args_) + " but rank " + std::to_string(q) +
           " called " + describe(other) + " (every rank must give the same count, datatype, operation and root)";
  }

  int me_, n_;
  CallArgs args_;
  uint64_t seq_;
  std::vector<std::vector<char>> parts_;  // by rank: what it contributed to this rank
  std::vector<char> have_;
  bool done_ = false;
};

ncclResult_t collective(Kind kind, const void* send, void* recv, size_t count, ncclDataType_t dtype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  CallArgs args;
  args.kind = kind;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.dtype = dtype;
  args.op = op;
  args.peer = root;
  return submit(comm, stream, args);
}

}  // namespace

std::unique_ptr<Step> make_collective_step(Rank& rank, const CallArgs& args) {
  return std::make_unique<CollectiveStep>(rank, args, rank.collectives_issued++);
}

}  // namespace brigade::emu::nccl

// ncclAllReduce: recvbuff = the op over every rank's sendbuff (count elements), on every rank.
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::all_reduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

// ncclBroadcast: every rank's recvbuff = root's sendbuff (sendbuff is read on the root only).
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

// ncclBcast: the in-place broadcast.
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

// ncclReduce: root's recvbuff = the op over every rank's sendbuff (recvbuff is written on the root only).
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

// ncclAllGather: recvbuff (sendcount * nranks) = every rank's sendbuff, in rank order.
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::all_gather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

// ncclReduceScatter: rank r's recvbuff (recvcount) = chunk r of the op over every sendbuff
// (recvcount * nranks).
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::reduce_scatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream);
}
