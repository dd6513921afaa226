// MLP: the transformer's position-wise feed-forward network, Linear -> GELU -> Linear (-> Dropout).
#pragma once

#include <memory>

#include "nn/activation.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace brigade::nn {

struct MLPOptions {
  int64_t hidden = 0;  // 0: 4 * dim
  bool bias = true;
  double dropout = 0;
  // The output projection `proj` writes into the residual stream, so it is initialised with
  // init.residual().
  Init init = {};
};

class MLP : public Module {
 public:
  explicit MLP(int64_t dim, const MLPOptions& options = {});

  std::string name() const override { return "MLP"; }
  Tensor forward(const Tensor& x) override;  // [..., dim] -> [..., dim]

  std::shared_ptr<Linear> fc;
  std::shared_ptr<GELU> act;  // shows the structure; forward fuses it into fc (see mlp.cpp)
  std::shared_ptr<Linear> proj;
  std::shared_ptr<Dropout> drop;
};

}  // namespace brigade::nn
