// Shapes and strides, and the small arithmetic every layer does on them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade {

using Shape = std::vector<int64_t>;    // sizes per dimension, outermost first
using Strides = std::vector<int64_t>;  // elements (not bytes) to step per dimension

std::string shape_str(const Shape& s);  // "[2, 3]"
int64_t shape_numel(const Shape& s);    // product of sizes (1 for a scalar shape [])
Strides contiguous_strides(const Shape& s);

// Wraps a possibly negative dim (-1 = last) into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// NumPy broadcasting of two shapes; throws "op: shapes [..] and [..] cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace brigade
