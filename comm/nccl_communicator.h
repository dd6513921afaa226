// NcclCommunicator: the NCCL transport (comm/nccl.h), declared for the three files that implement it
// (private: not installed, needs nccl.h and the CUDA runtime):
//   nccl_create.cpp — making communicators: nccl_communicator (a rank per process) and nccl_group
//                     (every rank in this process);
//   nccl_lanes.cpp  — the lanes (three NCCL communicators, a stream each), queuing a group on one,
//                     and the watchdog that bounds what runs on the GPU;
//   nccl.cpp        — the calls: exchange, the collectives, connect, split.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/nccl_check.h"
#include "core/stream.h"

namespace brigade::comm {

namespace nccl_detail {

// Each brigade communicator is three NCCL communicators over the same ranks, each with a stream of
// its own (docs/comm.md), because NCCL runs a communicator's groups one after another and a send
// may wait until its receiver has posted the matching receive:
//  - kHeaders carries the headers (handshake.h) that tell a receiver what to allocate. A header
//    behind data on the same communicator would wait for that data — which may wait for a peer that
//    waits for this header.
//  - kUp carries data from a lower rank to a higher one (and the collectives), kDown the rest. An
//    exchange issues its sends before its host waits for any incoming header, and a receive that
//    needs a header after it: two groups (run_exchange). On one data communicator, two ranks that
//    send each other a message with a header would each queue the other's receive behind its own
//    send, which waits for that receive. Split by direction, the sends a rank issues early and the
//    receives it issues late from the same peer run on different streams.
enum Lane : size_t { kUp = 0, kDown = 1, kHeaders = 2, kLanes = 3 };
using NcclComms = std::array<ncclComm_t, kLanes>;

// The data communicator of a message from rank `from` to rank `to` (both ends compute it alike).
inline Lane data_lane(int from, int to) { return from < to ? kUp : kDown; }
// How errors name a lane's communicator: "" for the first, which names the whole.
std::string lane_suffix(size_t lane);
// Non-blocking, and for the header lane a single channel.
ncclConfig_t lane_config(size_t lane);
void abort_all(NcclComms& comms);

// Polls a communicator that is being created, split, or is enqueuing non-blockingly. Returns its
// final state (ncclSuccess or an error), or ncclInProgress if the deadline passed first.
ncclResult_t poll_ready(ncclComm_t comm, const Deadline& deadline);
// What a call on a non-blocking communicator came to (its return value alone does not say).
ncclResult_t outcome(ncclComm_t comm, ncclResult_t returned, const Deadline& deadline);
// NCCL's words for `result`, with the communicator's last error when there is one.
std::string nccl_error(ncclComm_t comm, ncclResult_t result);

// A call that may legitimately answer "queued, still in progress" on a non-blocking communicator.
void check_queued(ncclResult_t result, const char* expr, const char* file, int line);
#define BRIGADE_NCCL_QUEUED(expr) ::brigade::comm::nccl_detail::check_queued((expr), #expr, __FILE__, __LINE__)

}  // namespace nccl_detail

class NcclCommunicator final : public Communicator {
 public:
  using NcclComms = nccl_detail::NcclComms;
  // Takes ready communicators.
  NcclCommunicator(NcclComms comms, int rank, int size, Device device, Milliseconds timeout);
  ~NcclCommunicator() override;
  bool overlaps_collectives() const override { return true; }
  bool matches_messages_in_order() const override { return true; }

 protected:
  // ---- the calls (nccl.cpp) ----
  void run_exchange(std::vector<Transfer>& transfers, const Deadline& deadline) override;
  void run_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline) override;
  std::function<void()> run_all_reduce_async(const Tensor& t, ReduceOp op, const Deadline& deadline) override;
  void run_broadcast(const Tensor& t, int root, const Deadline& deadline) override;
  void run_barrier(const Deadline& deadline) override;
  void run_connect(const std::vector<Link>& links, const Deadline& deadline) override;
  void run_connect_collectives(const std::vector<CollectiveUse>& uses, const Deadline& deadline) override;
  std::unique_ptr<Communicator> run_split(int color, int key, const std::vector<int>& members,
                                          const Deadline& deadline) override;
  // ---- the lanes (nccl_lanes.cpp) ----
  void abort_transport(const std::string& reason) override;

 private:
  using Lane = nccl_detail::Lane;

  // ---- the calls' parts (nccl.cpp) ----
  // An exchange's headers in flight (post_headers, read_headers).
  struct HeaderRound {
    size_t arriving = 0;          // how many headers arrive
    std::vector<size_t> landing;  // per transfer, where its arriving header lands in pinned_
  };
  Lane lane_of(const Transfer& t) const;
  std::vector<bool> late_round(const std::vector<Transfer>& transfers) const;
  void enqueue_data(const std::string& w, const Deadline& deadline, std::vector<Transfer>& transfers,
                    const std::vector<bool>& late, bool late_round,
                    std::array<std::vector<Tensor>, nccl_detail::kLanes>& keep);
  Event start_all_reduce(const Tensor& t, ReduceOp op, const Deadline& deadline, const std::string& name);
  HeaderRound post_headers(std::vector<Transfer>& transfers, const Deadline& deadline);
  void read_headers(std::vector<Transfer>& transfers, const HeaderRound& round, const Deadline& deadline);

  // ---- the lanes and the watchdog (nccl_lanes.cpp) ----
  struct InFlight {
    Event done;  // recorded after the transfer, on the stream it ran on (a lane's)
    Clock::time_point deadline;
    Milliseconds timeout;
    std::string what;
    std::vector<Tensor> keep;  // alive until the GPU is done with them (the allocator could reuse them)
  };
  using Calls = std::function<void(ncclComm_t comm, cudaStream_t stream)>;

  cudaStream_t raw(size_t lane) const { return static_cast<cudaStream_t>(streams_[lane].raw()); }
  void follow_caller(size_t lane);
  void enqueue(size_t lane, const std::string& w, const Deadline& deadline, const Calls& calls);
  void follow(const std::string& w, const Deadline& deadline, const Stream& stream, std::vector<Tensor> keep);
  void finish(size_t lane, const std::string& w, const Deadline& deadline, std::vector<Tensor> keep);
  void wait_for_stream(const std::string& w, const Deadline& deadline, const Stream& stream);
  bool wait_quietly(const Deadline& backstop);
  void watch();

  NcclComms comms_;  // per Lane; all null once aborted
  // Per Lane: the data lanes' transfers are fenced against the caller's stream by events, the
  // header lane's against nothing.
  std::array<Stream, nccl_detail::kLanes> streams_;
  static constexpr size_t kPinnedHeaders = 1024;  // header receives one exchange may hold
  WireHeader* pinned_ = nullptr;
  std::mutex mutex_;  // guards the communicators' lifetime against abort, and in_flight_
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace brigade::comm
