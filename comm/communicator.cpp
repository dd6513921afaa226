#include "comm/communicator.h"

#include <algorithm>
#include <mutex>
#include <tuple>

#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::comm {

struct Communicator::AbortState {
  mutable std::mutex mutex;
  bool aborted = false;
  std::string reason;
};

Communicator::Communicator(std::string backend, int rank, int size, Device device, Milliseconds timeout)
    : backend_(std::move(backend)),
      rank_(rank),
      size_(size),
      device_(device),
      timeout_(timeout),
      abort_(std::make_shared<AbortState>()) {
  BRIGADE_CHECK(size >= 1 && rank >= 0 && rank < size, "comm: rank ", rank, " is outside a group of ", size);
  BRIGADE_CHECK(timeout.count() > 0, "comm: the timeout must be positive, got ", timeout.count(), " ms");
}

Communicator::~Communicator() = default;

void Communicator::set_timeout(Milliseconds timeout) {
  BRIGADE_CHECK(timeout.count() > 0, "comm set_timeout: the timeout must be positive, got ", timeout.count(), " ms");
  timeout_ = timeout;
}

std::string Communicator::where() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ", " + backend_;
}

std::string Communicator::what(const std::string& op) const { return "comm " + op + " (" + where() + ")"; }

namespace {

std::string describe(const P2P& op) {
  bool send = op.kind == P2P::Kind::send;
  return std::string(send ? "send to" : "recv from") + " rank " + std::to_string(op.peer) + ", tag " +
         std::to_string(op.tag);
}

}  // namespace

// ---- checks ----

void Communicator::check_usable(const std::string& what) const {
  std::lock_guard<std::mutex> lock(abort_->mutex);
  if (abort_->aborted) throw AbortedError(what + ": the communicator was aborted earlier: " + abort_->reason);
}

void Communicator::check_peer(int peer, const std::string& what) const {
  BRIGADE_CHECK(peer >= 0 && peer < size_, what, ": peer ", peer, " is outside the group (ranks 0..", size_ - 1, ")");
}

void Communicator::check_tensor(const Tensor& t, const std::string& what) const {
  BRIGADE_CHECK(t.defined(), what, ": the tensor is undefined");
  BRIGADE_CHECK(t.device() == device_, what, ": the tensor is on ", t.device().str(), " but this communicator moves ",
                device_.str(), " tensors");
}

template <class Fn>
void Communicator::guarded(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    abort(e.what());
    throw;
  } catch (const std::exception& e) {  // a transport library's own exception type
    // Aborted already (by another thread; the transport cannot tell): the library's error is the
    // abort's consequence, not a failure of this call.
    const bool was_aborted = aborted();
    abort(e.what());
    if (was_aborted) throw AbortedError("comm (" + where() + "): " + e.what() + " (the communicator was aborted)");
    fail("comm (", where(), "): ", e.what());
  }
}

// ---- point to point ----

void Communicator::send(const Tensor& t, int peer, int tag, Shapes shapes) {
  std::vector<P2P> ops = {P2P::send(t, peer, tag, shapes)};
  exchange(ops);
}

Tensor Communicator::recv(int peer, int tag, Shapes shapes) {
  std::vector<P2P> ops = {P2P::recv(peer, tag, shapes)};
  exchange(ops);
  return ops[0].tensor;
}

void Communicator::recv_into(const Tensor& out, int peer, int tag, Shapes shapes) {
  BRIGADE_CHECK(out.defined(), what("recv from rank " + std::to_string(peer)), ": the destination is undefined");
  std::vector<P2P> ops = {P2P::recv_into(out, peer, tag, shapes)};
  exchange(ops);
}

void Communicator::exchange(std::vector<P2P>& ops) {
  if (ops.empty()) return;
  // Check everything before anything moves, so a bad op leaves the communicator usable.
  std::vector<Transfer> transfers;
  for (P2P& op : ops) {
    std::string w = what(describe(op));
    check_usable(w);
    check_peer(op.peer, w);
    BRIGADE_CHECK(op.tag >= 0, w, ": tags must be >= 0, got ", op.tag);
    if (op.kind == P2P::Kind::send || op.tensor.defined()) check_tensor(op.tensor, w);
    transfers.push_back({&op, false, std::move(w)});
  }
  // Receives into the caller's tensors write it in place (a handed-over or new tensor is not).
  std::vector<bool> in_place(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) in_place[i] = ops[i].kind == P2P::Kind::recv && ops[i].tensor.defined();
  // The handshake advances channel state; if one op of the batch is refused, none of it happened.
  Handshake before = handshake_;
  std::vector<Tensor> strided_destinations(ops.size());  // receives into non-contiguous views
  try {
    for (size_t i = 0; i < ops.size(); ++i) {
      P2P& op = ops[i];
      Transfer& t = transfers[i];
      if (op.kind == P2P::Kind::send) {
        // Receivers always get contiguous tensors of their own, whatever the transport, and never
        // the sender's autograd history.
        op.tensor = ops::contiguous(op.tensor.detach());
        t.header = handshake_.before_send(TensorMeta::of(op.tensor, op.shapes), op.peer, op.tag, t.what);
      } else {
        t.header = handshake_.before_recv(op.tensor, op.shapes, op.peer, op.tag, t.what);
        if (op.tensor.defined() && !op.tensor.is_contiguous()) {
          strided_destinations[i] = op.tensor;
          op.tensor = empty(op.tensor.shape(), op.tensor.dtype(), device_);
        }
      }
    }
  } catch (...) {
    handshake_ = std::move(before);
    for (size_t i = 0; i < ops.size(); ++i)
      if (strided_destinations[i].defined()) ops[i].tensor = strided_destinations[i];
    throw;
  }
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { run_exchange(transfers, deadline); });
  for (size_t i = 0; i < ops.size(); ++i) {
    if (strided_destinations[i].defined()) {
      ops::copy_(strided_destinations[i], ops[i].tensor);
      ops[i].tensor = strided_destinations[i];
    } else if (in_place[i]) {
      ops[i].tensor.storage().bump_version();  // written behind the ops layer: autograd must know
    }
  }
}

void Communicator::on_header(const Transfer& t, const TensorMeta& sent) {
  handshake_.on_header(sent, t.op->tensor, t.op->shapes, t.op->peer, t.op->tag, t.what);
}

const TensorMeta& Communicator::without_header(const Transfer& t) const {
  return handshake_.without_header(t.op->tensor, t.op->peer, t.op->tag, t.what);
}

void Communicator::without_header_in_memory(const Transfer& t, const TensorMeta& sent) const {
  BRIGADE_CHECK(sent.shapes == t.op->shapes, t.what, ": rank ", t.op->peer, " sends on a ", shapes_name(sent.shapes),
                "-shape channel but this receive is ", shapes_name(t.op->shapes), "-shape (both ends must agree)");
  const TensorMeta& expected = without_header(t);
  BRIGADE_CHECK(sent.same_tensor(expected), t.what, ": rank ", t.op->peer, " sent ", sent.str(),
                " but this receive expects ", expected.str());
}

void Communicator::allocate_destination(P2P& op, const TensorMeta& meta) const {
  if (!op.tensor.defined()) op.tensor = empty(meta.shape, meta.dtype, device_);
}

// ---- collectives ----

void Communicator::all_reduce(const Tensor& t, ReduceOp op) {
  std::string w = what(op == ReduceOp::sum ? "all_reduce(sum)" : "all_reduce(average)");
  check_usable(w);
  check_tensor(t, w);
  BRIGADE_CHECK(op == ReduceOp::sum || is_floating(t.dtype()), w, ": average needs a floating-point tensor, got ",
                dtype_name(t.dtype()));
  if (t.numel() == 0) return;
  Tensor dense = ops::contiguous(t.detach());
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { run_all_reduce(dense, op, deadline); });
  if (!t.is_contiguous()) ops::copy_(t, dense);
  t.storage().bump_version();  // written in place, behind the ops layer's back
}

Communicator::PendingReduce Communicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  std::string w = what(op == ReduceOp::sum ? "all_reduce_async(sum)" : "all_reduce_async(average)");
  check_usable(w);
  check_tensor(t, w);
  BRIGADE_CHECK(op == ReduceOp::sum || is_floating(t.dtype()), w, ": average needs a floating-point tensor, got ",
                dtype_name(t.dtype()));
  BRIGADE_CHECK(t.is_contiguous(), w, ": the tensor must be contiguous (shape ", shape_str(t.shape()), ", strides ",
                shape_str(t.strides()), ")");
  if (t.numel() == 0) return {};
  Deadline deadline = Deadline::after(timeout_);
  std::function<void()> wait;
  guarded([&] { wait = run_all_reduce_async(t.detach(), op, deadline); });
  t.storage().bump_version();  // written in place, behind the ops layer's back
  return PendingReduce(std::move(wait));
}

void Communicator::PendingReduce::wait() {
  if (wait_) wait_();
  wait_ = nullptr;
}

void Communicator::broadcast(const Tensor& t, int root) {
  std::string w = what("broadcast from rank " + std::to_string(root));
  check_usable(w);
  check_tensor(t, w);
  check_peer(root, w);
  if (t.numel() == 0) return;
  Tensor dense = ops::contiguous(t.detach());
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { run_broadcast(dense, root, deadline); });
  if (!t.is_contiguous()) ops::copy_(t, dense);
  t.storage().bump_version();
}

void Communicator::barrier() {
  check_usable(what("barrier"));
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { run_barrier(deadline); });
}

void Communicator::connect(std::vector<Link> links) {
  std::string w = what("connect of " + std::to_string(links.size()) + " links");
  check_usable(w);
  for (const Link& link : links) {
    check_peer(link.from, w + ", link " + std::to_string(link.from) + " -> " + std::to_string(link.to));
    check_peer(link.to, w + ", link " + std::to_string(link.from) + " -> " + std::to_string(link.to));
  }
  // The same list on every rank gives the same order here: every rank issues its groups alike.
  auto key = [](const Link& l) { return std::make_pair(l.from, l.to); };
  std::sort(links.begin(), links.end(), [&](const Link& a, const Link& b) { return key(a) < key(b); });
  links.erase(std::unique(links.begin(), links.end(), [&](const Link& a, const Link& b) { return key(a) == key(b); }),
              links.end());
  links.erase(std::remove_if(links.begin(), links.end(), [](const Link& l) { return l.from == l.to; }), links.end());
  if (links.empty()) return;
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { run_connect(links, deadline); });
}

void Communicator::connect_collectives(std::vector<CollectiveUse> uses) {
  std::string w = what("connect of " + std::to_string(uses.size()) + " collectives");
  check_usable(w);
  for (const CollectiveUse& use : uses) {
    BRIGADE_CHECK(use.numel > 0, w, ": a collective of ", use.numel, " elements");
    BRIGADE_CHECK(use.kind == CollectiveUse::Kind::broadcast || use.op == ReduceOp::sum || is_floating(use.dtype), w,
                  ": average needs a floating-point dtype, got ", dtype_name(use.dtype));
  }
  // The same list on every rank gives the same order here: every rank issues its calls alike.
  auto key = [](const CollectiveUse& u) { return std::make_tuple(int(u.kind), u.numel, int(u.dtype), int(u.op)); };
  std::sort(uses.begin(), uses.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  uses.erase(std::unique(uses.begin(), uses.end(), [&](const auto& a, const auto& b) { return key(a) == key(b); }),
             uses.end());
  if (uses.empty() || size_ == 1) return;
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { run_connect_collectives(uses, deadline); });
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  std::string w = what("split(color " + std::to_string(color) + ", key " + std::to_string(key) + ")");
  check_usable(w);
  // Everyone learns everyone's (color, key) with one all-reduce: each rank fills its own two slots
  // of a zero vector, and the sum is the gathered table.
  Tensor table = zeros({int64_t(size_), 2}, DType::i64);
  table.data<int64_t>()[2 * rank_] = color;
  table.data<int64_t>()[2 * rank_ + 1] = key;
  Tensor gathered = table.to(device_);
  all_reduce(gathered, ReduceOp::sum);
  std::vector<int64_t> entries(size_t(size_) * 2);
  {
    Tensor host = gathered.to(Device::cpu());
    std::copy_n(host.data<int64_t>(), entries.size(), entries.begin());
  }
  if (color < 0) {
    // Non-members still took part in the gather; the transport may need them for the split too.
    std::unique_ptr<Communicator> none;
    Deadline deadline = Deadline::after(timeout_);
    guarded([&] { none = run_split(color, key, {}, deadline); });
    return nullptr;
  }
  std::vector<int> members;
  for (int r = 0; r < size_; ++r)
    if (entries[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return entries[2 * a + 1] < entries[2 * b + 1]; });
  std::unique_ptr<Communicator> child;
  Deadline deadline = Deadline::after(timeout_);
  guarded([&] { child = run_split(color, key, members, deadline); });
  return child;
}

// ---- failure ----

void Communicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_->mutex);
    if (abort_->aborted) return;
    abort_->aborted = true;
    abort_->reason = reason;
  }
  try {
    abort_transport(reason);
  } catch (...) {
    // Aborting is best effort: the communicator is unusable either way, and the original error is
    // the one worth reporting.
  }
}

bool Communicator::aborted() const {
  std::lock_guard<std::mutex> lock(abort_->mutex);
  return abort_->aborted;
}

void Communicator::fail_timeout(const std::string& what, const Deadline& deadline, const std::string& detail) {
  std::string message =
      what + ": timed out after " + seconds_str(deadline.timeout()) + detail + "; the communicator is aborted";
  abort(message);
  throw TimeoutError(message);
}

}  // namespace brigade::comm
