#include "optim/sgd.h"

#include "kernels/ops.h"

namespace brigade::optim {

SGD::SGD(std::vector<NamedTensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{ParamGroup{std::move(params), {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), options.lr), options_(options) {
  check_non_negative("momentum", options.momentum);
  check_non_negative("dampening", options.dampening);
  check_non_negative("weight_decay", options.weight_decay);
  BRIGADE_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
                "SGD: nesterov momentum needs momentum > 0 and dampening == 0, got momentum ", options.momentum,
                " and dampening ", options.dampening);
}

std::vector<std::string> SGD::buffer_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

void SGD::update(const std::vector<Slot*>& active) {
  const SGDOptions& o = options_;
  for (Slot* slot : active) {
    const Tensor& p = slot->param;
    const double weight_decay = slot->weight_decay.value_or(o.weight_decay);
    // d starts as the gradient itself and becomes a private copy (in the state dtype) only when
    // something is about to modify it: the gradient tensor is never changed.
    Tensor d = p.grad();
    bool d_is_private = false;
    auto make_private = [&] {
      if (d_is_private) return;
      Tensor copy = ops::to_dtype(d, state_dtype(p));
      d = copy.same_as(d) ? ops::clone(d) : copy;
      d_is_private = true;
    };
    if (weight_decay != 0) {
      make_private();
      ops::add_(d, p, weight_decay);
    }
    if (o.momentum != 0) {
      auto it = slot->buffers.find("momentum_buffer");
      if (it == slot->buffers.end()) {
        // The first update seeds the buffer with d itself (no dampening), as PyTorch does.
        Tensor buf = ops::to_dtype(d, state_dtype(p));
        slot->buffers["momentum_buffer"] = buf.same_as(d) ? ops::clone(d) : buf;
      } else {
        ops::scale_(it->second, o.momentum);
        ops::add_(it->second, d, 1 - o.dampening);
      }
      const Tensor& buf = slot->buffers.at("momentum_buffer");
      if (o.nesterov) {
        make_private();
        ops::add_(d, buf, o.momentum);
      } else {
        d = buf;
      }
    }
    ops::add_(p, d, -lr());
  }
}

}  // namespace brigade::optim
