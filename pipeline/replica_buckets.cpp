#include "pipeline/replica_buckets.h"

#include "core/error.h"
#include "core/factory.h"
#include "kernels/ops.h"

namespace brigade::pipeline {

ReplicaBuckets::ReplicaBuckets(const std::vector<std::vector<Tensor>>& chunk_params, const std::vector<Tensor>& late,
                               size_t bucket_bytes) {
  for (const auto& params : chunk_params) chunks_.push_back(make_buckets(params, bucket_bytes));
  late_ = make_buckets(late, bucket_bytes);
}

std::vector<ReplicaBuckets::Bucket> ReplicaBuckets::make_buckets(const std::vector<Tensor>& params,
                                                                 size_t bucket_bytes) {
  std::vector<Bucket> out;
  size_t bytes = 0;
  for (const Tensor& p : params) {
    const bool fits = !out.empty() && out.back().front().dtype() == p.dtype() && bytes + p.nbytes() <= bucket_bytes;
    if (!fits) {
      out.emplace_back();
      bytes = 0;
    }
    out.back().push_back(p);
    bytes += p.nbytes();
  }
  return out;
}

size_t ReplicaBuckets::buckets() const {
  size_t n = late_.size();
  for (const auto& c : chunks_) n += c.size();
  return n;
}

std::vector<comm::CollectiveUse> ReplicaBuckets::uses() const {
  std::vector<comm::CollectiveUse> out;
  auto add = [&](const std::vector<Bucket>& buckets) {
    for (const Bucket& b : buckets) {
      int64_t numel = 0;
      for (const Tensor& p : b) numel += p.numel();  // flattened, or the one gradient itself
      out.push_back(comm::CollectiveUse::all_reduce(numel, b.front().dtype(), comm::ReduceOp::average));
    }
  };
  for (const auto& c : chunks_) add(c);
  add(late_);
  return out;
}

void ReplicaBuckets::start_chunk(comm::Communicator& replicas, int chunk) {
  BRIGADE_CHECK(chunk >= 0 && size_t(chunk) < chunks_.size(), "replica buckets: no chunk ", chunk);
  for (const Bucket& b : chunks_[size_t(chunk)]) start(replicas, b);
}

void ReplicaBuckets::start_late(comm::Communicator& replicas) {
  for (const Bucket& b : late_) start(replicas, b);
}

void ReplicaBuckets::start(comm::Communicator& replicas, const Bucket& bucket) {
  Started s;
  for (const Tensor& p : bucket) {
    if (!p.grad().defined()) p.impl().grad = zeros_like(p).impl_ptr();  // unused this step: its gradient is 0
    s.grads.push_back(p.grad());
  }
  if (s.grads.size() == 1 && s.grads[0].is_contiguous()) {
    s.pending = replicas.all_reduce_async(s.grads[0], comm::ReduceOp::average);  // no copy for a bucket of one
  } else {
    std::vector<Tensor> flat;
    for (const Tensor& g : s.grads) flat.push_back(g.reshape({g.numel()}));
    s.buffer = ops::concat(flat, 0);
    s.pending = replicas.all_reduce_async(s.buffer, comm::ReduceOp::average);
  }
  started_.push_back(std::move(s));
}

void ReplicaBuckets::finish() {
  for (Started& s : started_) {
    s.pending.wait();
    if (!s.buffer.defined()) continue;
    int64_t at = 0;
    for (const Tensor& g : s.grads) {
      ops::copy_(g, s.buffer.slice(0, at, at + g.numel()).view(g.shape()));
      at += g.numel();
    }
  }
  started_.clear();
}

}  // namespace brigade::pipeline
