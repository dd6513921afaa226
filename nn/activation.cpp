#include "nn/activation.h"

#include <sstream>

#include "autograd/functions.h"

namespace brigade::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor GELU::forward(const Tensor& x) { return gelu(x); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }

Dropout::Dropout(double prob) : p(prob) {
  BRIGADE_CHECK(prob >= 0 && prob < 1, "Dropout: p must be in [0, 1), got ", prob);
}

std::string Dropout::details() const {
  std::ostringstream os;
  os << "p=" << p;
  return os.str();
}

Tensor Dropout::forward(const Tensor& x) {
  // Skipping the call (rather than passing training=false) also leaves the generator untouched, so
  // adding a p=0 dropout to a model doesn't change the random stream of anything else.
  if (!is_training() || p == 0) return x;
  return dropout(x, p, true);
}

}  // namespace brigade::nn
