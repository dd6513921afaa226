// CPU reference: the AdamW update, one parameter after another.
//
// Per element, with t the 1-based step (PyTorch's torch.optim.AdamW, decoupled weight decay):
//   p <- p - lr * wd * p                          decay acts on the weight, not through the gradient
//   m <- b1 * m + (1 - b1) * g                    running mean of gradients
//   v <- b2 * v + (1 - b2) * g^2                  running mean of squared gradients
//   p <- p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// The bias corrections undo the zero initialisation of m and v; they depend only on t, so they are
// computed once per call in f64 rather than per element.
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/strided.h"

namespace brigade::cpu {
namespace {

// The scalars of one step, precomputed in the compute type T.
template <class T>
struct Coefficients {
  T decay;          // 1 - lr * wd
  T beta1, beta2;
  T one_minus_beta1, one_minus_beta2;
  T step_size;   // lr / (1 - b1^t)
  T sqrt_bias2;  // sqrt(1 - b2^t)
  T eps;

  explicit Coefficients(const ops::AdamWParams& p)
      : decay(T(1 - p.lr * p.weight_decay)),
        beta1(T(p.beta1)),
        beta2(T(p.beta2)),
        one_minus_beta1(T(1 - p.beta1)),
        one_minus_beta2(T(1 - p.beta2)),
        step_size(T(p.lr / (1 - std::pow(p.beta1, double(p.step))))),
        sqrt_bias2(T(std::sqrt(1 - std::pow(p.beta2, double(p.step))))),
        eps(T(p.eps)) {}
};

// The whole update for one element. T is the parameter's type, S the state's.
template <class T, class S>
inline void update(T& param, T grad, S& m, S& v, const Coefficients<T>& c) {
  T mt = c.beta1 * T(m) + c.one_minus_beta1 * grad;
  T vt = c.beta2 * T(v) + c.one_minus_beta2 * grad * grad;
  m = S(mt);
  v = S(vt);
  param = param * c.decay - c.step_size * mt / (std::sqrt(vt) / c.sqrt_bias2 + c.eps);
}

template <class T, class S>
void run(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const ops::AdamWParams& p) {
  const Coefficients<T> c(p);
  const bool flat = param.is_contiguous() && grad.is_contiguous() && m.is_contiguous() && v.is_contiguous();
  if (flat) {
    // The usual case: one flat loop, split across threads (for_each_row would keep a 1-D bias or a
    // single long row on one thread).
    T* pp = param.data<T>();
    const T* gp = grad.data<T>();
    S* mp = m.data<S>();
    S* vp = v.data<S>();
    parallel_for(param.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) update(pp[i], gp[i], mp[i], vp[i], c);
    });
    return;
  }
  for_each_row(param.shape(), {&param, &grad, &m, &v},
               [&c](const std::vector<char*>& ptr, const std::vector<int64_t>& st, int64_t n) {
                 T* pp = reinterpret_cast<T*>(ptr[0]);
                 const T* gp = reinterpret_cast<const T*>(ptr[1]);
                 S* mp = reinterpret_cast<S*>(ptr[2]);
                 S* vp = reinterpret_cast<S*>(ptr[3]);
                 for (int64_t i = 0; i < n; ++i) update(pp[i * st[0]], gp[i * st[1]], mp[i * st[2]], vp[i * st[3]], c);
               });
}

}  // namespace

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                const std::vector<Tensor>& v, const ops::AdamWParams& p) {
  for (size_t i = 0; i < params.size(); ++i) {
    visit_float(params[i].dtype(), "adamw_step_", [&](auto ptag) {
      visit_float(m[i].dtype(), "adamw_step_", [&](auto stag) {
        run<decltype(ptag), decltype(stag)>(params[i], grads[i], m[i], v[i], p);
      });
    });
  }
}

}  // namespace brigade::cpu
