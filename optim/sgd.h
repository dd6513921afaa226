// SGD: stochastic gradient descent with optional momentum, as torch.optim.SGD defines it.
//
// For each parameter p with gradient g (t counts this parameter's updates):
//   d = g + weight_decay * p                     (L2 decay, folded into the gradient)
//   with momentum:  buf = d at t = 1, else buf = momentum * buf + (1 - dampening) * d
//                   d = nesterov ? d + momentum * buf : buf
//   p = p - lr * d
#pragma once

#include "optim/optimizer.h"

namespace brigade::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<NamedTensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});

  const SGDOptions& options() const { return options_; }

 protected:
  void update(const std::vector<Slot*>& active) override;
  std::vector<std::string> buffer_names() const override;

 private:
  SGDOptions options_;
};

}  // namespace brigade::optim
