#include "comm/local.h"

#include <algorithm>

#include "comm/local_world.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::comm {

namespace {

// The world's errors (an abort elsewhere, a failed combine) say what happened, not to which call.
template <class Fn>
auto in_world(const std::string& what, Fn&& fn) {
  try {
    return fn();
  } catch (const AbortedError& e) {
    throw AbortedError(what + ": " + e.what());
  } catch (const Error& e) {
    fail(what, ": ", e.what());
  }
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalWorld> world, std::string group, int rank, int size, Device device,
                    Milliseconds timeout, LocalSends sends)
      : Communicator("local", rank, size, device, timeout),
        world_(std::move(world)),
        group_(std::move(group)),
        sends_(sends) {}

  bool queues_sends() const override { return sends_ == LocalSends::queued; }

 protected:
  void run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) override {
    // Posting never blocks, so all sends go first; then the receives wait in turn. Whatever order
    // the peers run in, every receive's letter is eventually posted.
    std::vector<std::pair<Transfer*, uint64_t>> posted;  // each send and its ticket in the mailbox
    for (Transfer& t : transfers) {
      if (t.op->kind != P2P::Kind::send) continue;
      LocalWorld::Letter letter{wrap(t.op->tensor), t.op->shapes};
      const uint64_t ticket =
          in_world(t.what, [&] { return world_->post({group_, rank(), t.op->peer, t.op->tag}, std::move(letter)); });
      posted.push_back({&t, ticket});
    }
    for (Transfer& t : transfers) {
      if (t.op->kind != P2P::Kind::recv) continue;
      auto letter = in_world(t.what, [&] { return world_->take({group_, t.op->peer, rank(), t.op->tag}, deadline); });
      if (!letter) fail_timeout(t.what, deadline);
      // The same checks, at the same moments, as a transport that sends headers over the wire.
      TensorMeta sent = TensorMeta::of(letter->parcel.tensor, letter->shapes);
      if (t.header) on_header(t, sent);
      else without_header_in_memory(t, sent);
      Tensor got = unwrap(letter->parcel, device());
      if (t.op->tensor.defined()) ops::copy_(t.op->tensor, got);
      else t.op->tensor = got;
    }
    if (sends_ == LocalSends::queued) return;
    // Rendezvous: the exchange ends only when the peers have taken what it sent.
    for (auto& [t, ticket] : posted) {
      const bool taken = in_world(
          t->what, [&] { return world_->wait_taken({group_, rank(), t->op->peer, t->op->tag}, ticket, deadline); });
      if (!taken)
        fail_timeout(t->what, deadline, " waiting for rank " + std::to_string(t->op->peer) + " to receive it");
    }
  }

  void run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) override {
    // Sum in rank order, in f64 for f64 and integers (exact up to 2^53) and f32 otherwise, so every
    // rank gets bitwise the same result whatever order the threads arrived in.
    DType acc_dtype = (t.dtype() == DType::f64 || is_integral(t.dtype())) ? DType::f64 : DType::f32;
    int n = size();
    Device device = this->device();
    Parcel result = meet("all_reduce", t, deadline, [=](std::vector<Parcel>& parts) {
      // A fresh accumulator: rank 0's own tensor must not become the result every rank reads.
      Tensor first = unwrap(parts[0], device);
      Tensor acc = first.dtype() == acc_dtype ? ops::clone(first) : ops::to_dtype(first, acc_dtype);
      for (int r = 1; r < n; ++r) ops::add_(acc, ops::to_dtype(unwrap(parts[size_t(r)], device), acc_dtype));
      if (op == ReduceOp::average) ops::scale_(acc, 1.0 / n);
      return wrap(acc);
    });
    ops::copy_(t, unwrap(result, device));
  }

  void run_broadcast(const Tensor& t, int root, const Deadline& deadline) override {
    // A copy of root's tensor: root leaves the meeting at once and may overwrite its own.
    Device device = this->device();
    Parcel result = meet("broadcast", t, deadline, [=](std::vector<Parcel>& parts) {
      return wrap(ops::clone(unwrap(parts[size_t(root)], device)));
    });
    // Every rank unwraps, the root included: on a GPU that makes the root's stream wait for the
    // combiner's clone, which reads the root's tensor — or the root could overwrite (or free and
    // reuse) it before the clone ran.
    const Tensor got = unwrap(result, device);
    if (rank() != root) ops::copy_(t, got);
  }

  void run_barrier(const Deadline& deadline) override {
    meet("barrier", Tensor(), deadline, [](std::vector<Parcel>&) { return Parcel{}; });
  }

  std::unique_ptr<Communicator> run_split(int color, int, const std::vector<int>& members,
                                          const Deadline&) override {
    if (members.empty()) return nullptr;
    int index = int(std::find(members.begin(), members.end(), rank()) - members.begin());
    // Every member numbers its collectives alike, so they all derive the same child group name.
    std::string child = group_ + "/" + std::to_string(collectives_) + ":" + std::to_string(color);
    return std::make_unique<LocalCommunicator>(world_, child, index, int(members.size()), device(), timeout(), sends_);
  }

  void abort_transport(const std::string& reason) override { world_->abort(reason); }

 private:
  Parcel meet(const std::string& op, const Tensor& t, const Deadline& deadline, const LocalWorld::Combine& combine) {
    std::vector<int> missing;
    uint64_t sequence = collectives_++;
    std::optional<Parcel> result = in_world(what(op), [&] {
      return world_->meet(group_, sequence, rank(), size(), wrap(t), combine, deadline, &missing);
    });
    if (!result) {
      std::string ranks;
      for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      fail_timeout(what(op), deadline, " waiting for rank(s) " + ranks);
    }
    return *result;
  }

  std::shared_ptr<LocalWorld> world_;
  std::string group_;
  LocalSends sends_;
  uint64_t collectives_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> local_group(const std::vector<Device>& devices, Milliseconds timeout,
                                                       LocalSends sends) {
  BRIGADE_CHECK(!devices.empty(), "comm local_group: at least one rank is needed");
  auto world = std::make_shared<LocalWorld>();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (size_t r = 0; r < devices.size(); ++r)
    comms.push_back(
        std::make_unique<LocalCommunicator>(world, "world", int(r), int(devices.size()), devices[r], timeout, sends));
  return comms;
}

std::vector<std::unique_ptr<Communicator>> local_group(int size, Device device, Milliseconds timeout,
                                                       LocalSends sends) {
  BRIGADE_CHECK(size >= 1, "comm local_group: at least one rank is needed, got ", size);
  return local_group(std::vector<Device>(size_t(size), device), timeout, sends);
}

}  // namespace brigade::comm
