// What `brigade train` trains on: a stream of next-token batches.
//
// Two tasks implement it: the digit-sorting task generated on the fly (sort_task.h, the default) and
// language modelling on token shards (text_task.h, --data DIR). The trainer only asks for rows of
// the training stream by position, so both resume exactly: the position is a count of rows, saved in
// every checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace brigade::train {

// inputs and targets [rows, T] i64 on the CPU; a target of -1 is not graded (cross_entropy skips it).
struct Batch {
  Tensor inputs;
  Tensor targets;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual int64_t vocab_size() const = 0;       // the model's vocabulary (token ids are below it)
  virtual int64_t sequence_length() const = 0;  // T, the model's block size
  // Rows [first, first + rows) of the training stream: a pure function of `first`, so a resumed run
  // (or another data-parallel replica) reads exactly the rows it should.
  virtual Batch train_batch(int64_t first, int64_t rows) const = 0;
  // What the run trains on, for the header ("task: sort 12 digits, e.g. ...").
  virtual std::string describe() const = 0;
};

}  // namespace brigade::train
