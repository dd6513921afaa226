// The metadata handshake: a receiver learns a tensor's shape and dtype before any data moves.
//
// Every message travels on a channel: (sender, receiver, tag). A transport that moves raw bytes
// (gloo, nccl) sends a small header in front of the data so the receiver can allocate the right
// tensor and check it is what it expected. How often depends on the channel's kind, chosen by both
// ends with `Shapes`:
//
//   Shapes::fixed    the header goes with the channel's first message only. Both ends remember the
//                    agreed shape; a later message of another shape is refused locally, on the side
//                    that deviates, before anything moves. Costs nothing per message.
//   Shapes::varying  a header goes with every message (one extra small transfer), so each message
//                    may have its own shape — e.g. the last, shorter micro-batch of an epoch.
//   Shapes::preset   no header, ever: the receiver already knows the tensor and names it with
//                    P2P::recv_into (a pipeline's gradient has the shape and dtype of the activation
//                    it answers). Nothing needs to reach the receiver's host before the data, so on
//                    NCCL the receive is queued at once, with no round trip. The sender cannot check
//                    what the receiver expects: both ends must derive the tensor from what they share.
//
// The header also carries the sender's kind, so two ends that disagree about it fail on the first
// message instead of misreading the byte stream later. Transports that hand tensors over in memory
// (local) skip the wire format but run exactly the same checks, so a program that passes on threads
// behaves the same across processes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "core/tensor.h"

namespace brigade::comm {

enum class Shapes : uint8_t { fixed, varying, preset };
const char* shapes_name(Shapes shapes);  // "fixed", "varying" or "preset"

// What a header announces.
struct TensorMeta {
  DType dtype = DType::f32;
  Shape shape;
  Shapes shapes = Shapes::fixed;  // the sender's channel kind

  static TensorMeta of(const Tensor& t, Shapes shapes);
  size_t nbytes() const { return size_t(shape_numel(shape)) * dtype_size(dtype); }
  bool same_tensor(const TensorMeta& o) const { return dtype == o.dtype && shape == o.shape; }
  std::string str() const;  // "[2, 8] f32"
};

// The fixed-size wire form: 17 little-endian 64-bit words (136 bytes). Word 0 is a magic number and
// version, word 1 packs dtype, kind and rank, words 2.. the sizes.
constexpr int kMaxDims = 15;
struct WireHeader {
  uint64_t words[2 + kMaxDims] = {};
};
WireHeader encode_header(const TensorMeta& meta);
// Throws naming `from` ("rank 3") when the bytes are not a header: a sign the two ends' message
// sequences diverged.
TensorMeta decode_header(const WireHeader& header, const std::string& from);

// Both directions' channel state of one communicator. `what` arguments describe the operation
// ("comm recv from rank 0, tag 5 (rank 1 of 2, gloo)"); every error starts with it.
class Handshake {
 public:
  // Before a send: throws if the channel's kind changed or a fixed channel's shape changed (nothing
  // has moved yet). Returns whether this message carries a header.
  bool before_send(const TensorMeta& sending, int peer, int tag, const std::string& what);

  // Before a receive into `out` (undefined: into a new tensor): throws if the channel's kind changed,
  // or `out` contradicts a fixed channel's agreed tensor. Returns whether a header will arrive.
  bool before_recv(const Tensor& out, Shapes shapes, int peer, int tag, const std::string& what);

  // A header arrived: checks the sender's tensor against the receiver's expectation (its kind, and
  // `out` when defined), naming both sides when they differ. Fixes a fixed channel's tensor.
  void on_header(const TensorMeta& sent, const Tensor& out, Shapes shapes, int peer, int tag,
                 const std::string& what);

  // A receive without a header (a fixed channel after its first message, or a preset one): the agreed
  // tensor, after
  // checking `out` (when defined) against it.
  const TensorMeta& without_header(const Tensor& out, int peer, int tag, const std::string& what) const;

 private:
  enum class Direction : uint8_t { send, recv };
  struct Channel {
    Shapes shapes = Shapes::fixed;
    bool agreed = false;  // `tensor` is known (a receive learns it from the first header)
    TensorMeta tensor;
  };
  using Key = std::tuple<Direction, int, int>;  // direction, peer, tag
  std::map<Key, Channel> channels_;             // a channel exists from its first message on
};

}  // namespace brigade::comm
