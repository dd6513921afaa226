// The emulated NCCL's point-to-point operations: ncclSend and ncclRecv.
//
// Written from the NCCL User Guide: "Point To Point Communication Functions" (API) and
// "Point-to-point communication" (usage). A send needs a receive on the peer with the same count
// and datatype; both are blocking for the GPU, and those that must progress together go in one
// group.
//
// Matching: the n-th ncclSend from rank A to rank B on a communicator meets the n-th ncclRecv on B
// from A, in issue order; there are no tags. Sends are rendezvous: the sender posts its data when
// its stream reaches the send, but the send completes only once the receiver has taken it (an ack
// comes back). So a program that counts on sends completing before their receives are posted
// hangs here as it may on a GPU — and is reported when every rank of the communicator is stuck.
// A count or datatype that differs between the two sides is refused (nothing is copied) and is
// both ranks' asynchronous error, naming both calls: NCCL leaves it undefined.
#include <cstring>

#include "emulator/nccl_internal.h"
#include "emulator/runtime.h"

using namespace brigade::emu::nccl;

namespace brigade::emu::nccl {
namespace {

std::string key(const char* what, int from, int to, uint64_t seq) {
  return std::string(what) + "." + std::to_string(from) + "." + std::to_string(to) + "." + std::to_string(seq);
}

std::string mismatch(const World& world, int sender, const Envelope& sent, int receiver, const Envelope& expected) {
  auto call = [](const Envelope& e) {
    return "count " + std::to_string(e.count) + ", " + dtype_name(ncclDataType_t(e.dtype));
  };
  return "ncclSend/ncclRecv mismatch on " + world.short_name() + ": rank " + std::to_string(sender) +
         "'s ncclSend to rank " + std::to_string(receiver) + " has " + call(sent) + " but rank " +
         std::to_string(receiver) + "'s ncclRecv from rank " + std::to_string(sender) + " has " + call(expected) +
         " (NCCL needs the same count and datatype on both sides; nothing was copied)";
}

// "" when the call's buffer of `count` elements is device memory of the rank's device.
std::string check_buffer(const Rank& rank, const CallArgs& args, const void* buffer) {
  const size_t bytes = args.count * dtype_size(args.dtype);
  if (bytes == 0) return "";
  return brigade::emu::check_device_range(describe(args) + " on " + rank.name(), buffer, bytes, rank.device);
}

class SendStep final : public Step {
 public:
  SendStep(int me, const CallArgs& args, uint64_t seq) : me_(me), args_(args), seq_(seq) {}

  std::string start(Rank& rank) override {
    std::string fault = check_buffer(rank, args_, args_.send);
    if (!fault.empty()) return fault;
    Message message;
    message.envelope = envelope();
    const char* data = static_cast<const char*>(args_.send);
    if (args_.count > 0) message.data.assign(data, data + args_.count * dtype_size(args_.dtype));
    post(*rank.world, me_, args_.peer, key("p2p", me_, args_.peer, seq_), std::move(message));
    return "";
  }

  StepResult poll(Rank& rank) override {
    Message ack;
    if (!fetch(*rank.world, args_.peer, me_, key("ack", me_, args_.peer, seq_), &ack)) return {};
    done_ = true;
    if (ack.envelope.refused) return {true, ncclInvalidUsage, mismatch(*rank.world, me_, envelope(), args_.peer, ack.envelope)};
    return {true, ncclSuccess, ""};
  }

  bool done() const override { return done_; }
  std::string waits() const override { return describe(args_); }
  std::vector<int> awaited() const override { return {args_.peer}; }

 private:
  Envelope envelope() const {
    Envelope e;
    e.kind = Kind::send;
    e.dtype = int32_t(args_.dtype);
    e.count = args_.count;
    return e;
  }

  int me_;
  CallArgs args_;
  uint64_t seq_;
  bool done_ = false;
};

class RecvStep final : public Step {
 public:
  RecvStep(int me, const CallArgs& args, uint64_t seq) : me_(me), args_(args), seq_(seq) {}

  std::string start(Rank& rank) override { return check_buffer(rank, args_, args_.recv); }

  StepResult poll(Rank& rank) override {
    Message message;
    if (!fetch(*rank.world, args_.peer, me_, key("p2p", args_.peer, me_, seq_), &message)) return {};
    done_ = true;
    Message ack;
    ack.envelope.kind = Kind::ack;
    ack.envelope.dtype = int32_t(args_.dtype);
    ack.envelope.count = args_.count;
    const Envelope& sent = message.envelope;
    ack.envelope.refused = sent.count != args_.count || sent.dtype != int32_t(args_.dtype);
    if (!ack.envelope.refused && !message.data.empty()) std::memcpy(args_.recv, message.data.data(), message.data.size());
    post(*rank.world, me_, args_.peer, key("ack", args_.peer, me_, seq_), ack);
    if (ack.envelope.refused) return {true, ncclInvalidUsage, mismatch(*rank.world, args_.peer, sent, me_, ack.envelope)};
    return {true, ncclSuccess, ""};
  }

  bool done() const override { return done_; }
  std::string waits() const override { return describe(args_); }
  std::vector<int> awaited() const override { return {args_.peer}; }

 private:
  int me_;
  CallArgs args_;
  uint64_t seq_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Step> make_p2p_step(Rank& rank, const CallArgs& args) {
  const size_t peer = size_t(args.peer);
  if (args.kind == Kind::send) return std::make_unique<SendStep>(rank.rank, args, rank.sends_issued[peer]++);
  return std::make_unique<RecvStep>(rank.rank, args, rank.recvs_issued[peer]++);
}

}  // namespace brigade::emu::nccl

// ncclSend: sends `count` elements of `datatype` from `sendbuff` (device memory of the
// communicator's device) to rank `peer`, on `stream`.
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  CallArgs args;
  args.kind = Kind::send;
  args.send = sendbuff;
  args.count = count;
  args.dtype = datatype;
  args.peer = peer;
  return submit(comm, stream, args);
}

// ncclRecv: receives `count` elements of `datatype` from rank `peer` into `recvbuff`, on `stream`.
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  CallArgs args;
  args.kind = Kind::recv;
  args.recv = recvbuff;
  args.count = count;
  args.dtype = datatype;
  args.peer = peer;
  return submit(comm, stream, args);
}
