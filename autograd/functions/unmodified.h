// Indices are not inputs the tape tracks (they get no gradient), so embedding and cross_entropy
// check them themselves: a backward with indices changed since the forward would pair this
// forward's activations with other rows or targets — a wrong gradient, not an error, unless refused.
#pragma once

#include "core/error.h"
#include "kernels/ops.h"

namespace brigade::detail {

inline void check_unmodified(const char* op, const ops::CheckedIndices& checked, const char* what) {
  BRIGADE_CHECK(checked.source_storage.version() == checked.source_version, "backward of ", op, ": its ", what,
                " (shape ", shape_str(checked.source.shape()), ") were modified in place after ", op,
                " used them; clone them before modifying them");
}

}  // namespace brigade::detail
