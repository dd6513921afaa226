#include "autograd/autocast.h"

#include "autograd/functions.h"

namespace brigade {
namespace {

// Per thread, like the tape: each pipeline rank thread computes under its own stage's scope.
thread_local std::optional<DType> t_autocast;

}  // namespace

Autocast::Autocast(std::optional<DType> dtype) : outer_(t_autocast) {
  BRIGADE_CHECK(!dtype || is_floating(*dtype), "Autocast: the compute dtype must be floating point, got ",
                dtype_name(*dtype));
  t_autocast = dtype == DType::f32 ? std::nullopt : dtype;
}

Autocast::~Autocast() { t_autocast = outer_; }

std::optional<DType> autocast_dtype() { return t_autocast; }

Tensor autocast(const Tensor& x) {
  if (!t_autocast || !x.defined() || x.dtype() != DType::f32) return x;
  return to_dtype(x, *t_autocast);
}

Tensor autocast_to_match(const Tensor& x, const Tensor& other) {
  if (!other.defined() || !is_half(other.dtype())) return x;
  return autocast(x);
}

}  // namespace brigade
