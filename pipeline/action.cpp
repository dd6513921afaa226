#include "pipeline/action.h"

#include <sstream>

namespace brigade::pipeline {

int Layout::peer_stage(const Action& a, int rank) const {
  const int s = stage(rank, a.chunk);
  int other = -1;
  switch (a.kind) {
    case ActionKind::send_activation:
    case ActionKind::recv_gradient: other = s + 1; break;
    case ActionKind::recv_activation:
    case ActionKind::send_gradient: other = s - 1; break;
    default: return -1;
  }
  return other >= 0 && other < stages() ? other : -1;
}

const char* kind_name(ActionKind k) {
  switch (k) {
    case ActionKind::forward: return "forward";
    case ActionKind::backward: return "backward";
    case ActionKind::backward_input: return "backward-input";
    case ActionKind::backward_weight: return "backward-weight";
    case ActionKind::send_activation: return "send-activation";
    case ActionKind::recv_activation: return "recv-activation";
    case ActionKind::send_gradient: return "send-gradient";
    case ActionKind::recv_gradient: return "recv-gradient";
  }
  return "?";
}

namespace {

const char* letter(ActionKind k) {
  switch (k) {
    case ActionKind::forward: return "F";
    case ActionKind::backward: return "B";
    case ActionKind::backward_input: return "I";
    case ActionKind::backward_weight: return "W";
    case ActionKind::send_activation: return "sendA";
    case ActionKind::recv_activation: return "recvA";
    case ActionKind::send_gradient: return "sendG";
    case ActionKind::recv_gradient: return "recvG";
  }
  return "?";
}

}  // namespace

std::string short_name(const Action& a, int rank, const Layout& layout) {
  std::ostringstream os;
  os << letter(a.kind) << a.microbatch;
  if (layout.chunks > 1) os << '.' << a.chunk;
  if (a.overlapped) os << '&';  // paired with the backward after it
  if (!is_compute(a.kind)) {
    const int peer = layout.peer_stage(a, rank);
    os << (is_send(a.kind) ? '>' : '<');
    if (peer >= 0) {
      os << layout.rank_of(peer);
    } else {
      os << '?';  // no such stage: the simulator reports it
    }
  }
  return os.str();
}

std::string describe(const Action& a, int rank, const Layout& layout) {
  std::ostringstream os;
  const int s = layout.stage(rank, a.chunk);
  if (is_compute(a.kind)) {
    os << letter(a.kind) << "(micro-batch " << a.microbatch;
    if (layout.chunks > 1) os << ", chunk " << a.chunk << " = stage " << s;
    if (a.overlapped) os << ", overlapped with the backward after it";
    os << ")";
    return os.str();
  }
  const bool activation = a.kind == ActionKind::send_activation || a.kind == ActionKind::recv_activation;
  os << (is_send(a.kind) ? "SEND " : "RECV ") << (activation ? "activation" : "gradient") << " of micro-batch "
     << a.microbatch << (is_send(a.kind) ? " from stage " : " for stage ") << s;
  const int peer = layout.peer_stage(a, rank);
  if (peer < 0) {
    os << (is_send(a.kind) ? " to" : " from") << " a stage outside the pipeline";
  } else {
    os << (is_send(a.kind) ? " to rank " : " from rank ") << layout.rank_of(peer) << " (stage " << peer << ")";
  }
  return os.str();
}

}  // namespace brigade::pipeline
