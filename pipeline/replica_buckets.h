// Data parallelism: averaging each gradient across the replicas of a stage, in buckets, started as
// soon as the gradients are final.
//
// Every replica runs the same schedule, so the same gradients become final at the same point of the
// step on every replica. A chunk's are final after its last B or W (Executor::on_weights_final); its
// buckets' all-reduces start right there. On NCCL they run on the replica communicator's stream while
// the rest of the backward computes, and finish() only makes the caller's stream wait at the end of
// the step; on other transports each one is done when started (comm::Communicator::all_reduce_async).
// Tied copies are averaged last (start_late), after the pipeline has summed them across stages.
//
// Consecutive gradients of one chunk and dtype share a bucket up to bucket_bytes, flattened into one
// buffer: every message costs a latency (a round trip for gloo, a kernel launch and a handshake for
// NCCL), so a model with many small parameters pays it per bucket, not per parameter. The buckets do
// not depend on when they start, so the overlapped and the end-of-step runs give the same bits.
#pragma once

#include <vector>

#include "comm/communicator.h"

namespace brigade::pipeline {

class ReplicaBuckets {
 public:
  // chunk_params[c]: the parameters whose gradients are final when chunk c's are (each listed once,
  // in one chunk); late: those averaged at the end of the step. bucket_bytes 0: one per parameter.
  ReplicaBuckets(const std::vector<std::vector<Tensor>>& chunk_params, const std::vector<Tensor>& late,
                 size_t bucket_bytes);

  void start_chunk(comm::Communicator& replicas, int chunk);
  void start_late(comm::Communicator& replicas);
  // The caller's stream waits for every started reduction; flattened buckets are copied back.
  void finish();
  void drop() { started_.clear(); }  // after a failure (the communicator is aborted anyway)
  size_t buckets() const;            // how many all-reduces one step makes
  // Those all-reduces (their sizes, dtypes, and the average), for Communicator::connect_collectives.
  std::vector<comm::CollectiveUse> uses() const;
  size_t started() const { return started_.size(); }  // since the last finish()

 private:
  using Bucket = std::vector<Tensor>;  // parameters
  struct Started {
    comm::Communicator::PendingReduce pending;
    Tensor buffer;               // the flattened gradients, when the bucket holds several
    std::vector<Tensor> grads;   // where they go back to
  };
  static std::vector<Bucket> make_buckets(const std::vector<Tensor>& params, size_t bucket_bytes);
  void start(comm::Communicator& replicas, const Bucket& bucket);

  std::vector<std::vector<Bucket>> chunks_;
  std::vector<Bucket> late_;
  std::vector<Started> started_;
};

}  // namespace brigade::pipeline
