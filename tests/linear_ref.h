// A linear layer as plain f64 loops, for the tests that check modules against references of their own.
#pragma once

#include <cstdint>
#include <vector>

namespace test {

// y[r, o] = sum_i x[r, i] * w[o, i] + b[o]  (w is [out, in], b may be empty)
inline std::vector<double> linear_ref(const std::vector<double>& x, int64_t rows, int64_t in,
                                      const std::vector<double>& w, const std::vector<double>& b, int64_t out) {
  std::vector<double> y(size_t(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[size_t(o)];
      for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * w[size_t(o * in + i)];
      y[size_t(r * out + o)] = s;
    }
  return y;
}

}  // namespace test
