#include "comm/handshake.h"


#include "core/error.h"

namespace brigade::comm {

namespace {

constexpr uint64_t kMagic = 0x6272696764650001ull;  // "brigde" + protocol version 1

void check_same_kind(Shapes mine, Shapes theirs, const char* mine_role, const std::string& what) {
  BRIGADE_CHECK(mine == theirs, what, ": this channel was opened as ", shapes_name(theirs), "-shape but this ",
                mine_role, " is ", shapes_name(mine), "-shape; a channel (peer, tag) keeps one kind");
}

std::string fixed_hint() { return "; messages whose shape changes need Shapes::varying at both ends"; }

}  // namespace

const char* shapes_name(Shapes shapes) {
  switch (shapes) {
    case Shapes::fixed: return "fixed";
    case Shapes::varying: return "varying";
    case Shapes::preset: return "preset";
  }
  return "unknown";
}

TensorMeta TensorMeta::of(const Tensor& t, Shapes shapes) { return {t.dtype(), t.shape(), shapes}; }

std::string TensorMeta::str() const { return shape_str(shape) + " " + dtype_name(dtype); }

WireHeader encode_header(const TensorMeta& meta) {
  BRIGADE_CHECK(meta.shape.size() <= size_t(kMaxDims), "comm: tensors of at most ", kMaxDims,
                " dims can be sent, got ", shape_str(meta.shape));
  WireHeader h;
  h.words[0] = kMagic;
  h.words[1] = uint64_t(meta.dtype) | uint64_t(meta.shapes) << 8 | uint64_t(meta.shape.size()) << 16;
  for (size_t d = 0; d < meta.shape.size(); ++d) h.words[2 + d] = uint64_t(meta.shape[d]);
  return h;
}

TensorMeta decode_header(const WireHeader& h, const std::string& from) {
  BRIGADE_CHECK(h.words[0] == kMagic, "comm: the header from ", from,
                " is garbled (wrong magic number): the two ends' message sequences diverged");
  uint64_t dtype = h.words[1] & 0xff, shapes = (h.words[1] >> 8) & 0xff, ndim = (h.words[1] >> 16) & 0xff;
  BRIGADE_CHECK(dtype <= uint64_t(DType::i64) && shapes <= 1 && ndim <= uint64_t(kMaxDims), "comm: the header from ",
                from, " is garbled (dtype ", dtype, ", kind ", shapes, ", ", ndim, " dims)");
  TensorMeta meta{DType(dtype), Shape(ndim), Shapes(shapes)};
  for (size_t d = 0; d < ndim; ++d) meta.shape[d] = int64_t(h.words[2 + d]);
  return meta;
}

bool Handshake::before_send(const TensorMeta& sending, int peer, int tag, const std::string& what) {
  auto [it, first] = channels_.try_emplace({Direction::send, peer, tag});
  Channel& ch = it->second;
  if (first) {
    ch = {sending.shapes, true, sending};
    return sending.shapes != Shapes::preset;
  }
  check_same_kind(sending.shapes, ch.shapes, "send", what);
  if (ch.shapes == Shapes::preset) return false;
  if (ch.shapes == Shapes::varying) return true;
  BRIGADE_CHECK(sending.same_tensor(ch.tensor), what, ": this fixed-shape channel carries ", ch.tensor.str(),
                " (set by its first message) but this send is ", sending.str(), fixed_hint());
  return false;
}

bool Handshake::before_recv(const Tensor& out, Shapes shapes, int peer, int tag, const std::string& what) {
  auto [it, first] = channels_.try_emplace({Direction::recv, peer, tag});
  Channel& ch = it->second;
  if (!first) check_same_kind(shapes, ch.shapes, "receive", what);
  if (shapes == Shapes::preset) {
    // The receiver states the tensor; it is what this message is agreed to carry.
    BRIGADE_CHECK(out.defined(), what, ": a preset-shape receive names its tensor (P2P::recv_into); without one "
                  "there is no header to learn the shape from");
    ch = {shapes, true, TensorMeta::of(out, shapes)};
    return false;
  }
  if (first) {
    ch.shapes = shapes;
    return true;
  }
  if (ch.shapes == Shapes::varying) return true;
  if (ch.agreed && out.defined()) without_header(out, peer, tag, what);  // fail before anything moves
  return false;
}

void Handshake::on_header(const TensorMeta& sent, const Tensor& out, Shapes shapes, int peer, int tag,
                          const std::string& what) {
  std::string sender = "rank " + std::to_string(peer);
  BRIGADE_CHECK(sent.shapes == shapes, what, ": ", sender, " sends on a ", shapes_name(sent.shapes),
                "-shape channel but this receive is ", shapes_name(shapes), "-shape (both ends must agree)");
  if (out.defined()) {
    TensorMeta expected = TensorMeta::of(out, shapes);
    BRIGADE_CHECK(sent.same_tensor(expected), what, ": ", sender, " sent ", sent.str(), " but this receive expects ",
                  expected.str());
  }
  Channel& ch = channels_[{Direction::recv, peer, tag}];
  ch = {shapes, true, sent};
}

const TensorMeta& Handshake::without_header(const Tensor& out, int peer, int tag, const std::string& what) const {
  auto it = channels_.find({Direction::recv, peer, tag});
  BRIGADE_CHECK(it != channels_.end() && it->second.agreed, what,
                ": internal error: no agreed tensor on this fixed- or preset-shape channel");
  const TensorMeta& agreed = it->second.tensor;
  if (out.defined()) {
    TensorMeta expected = TensorMeta::of(out, Shapes::fixed);
    BRIGADE_CHECK(agreed.same_tensor(expected), what, ": this receive expects ", expected.str(),
                  " but the fixed-shape channel carries ", agreed.str(), " (rank ", peer,
                  " sent that in its first message)", fixed_hint());
  }
  return agreed;
}

}  // namespace brigade::comm
