// The emulated NCCL's group calls and issuing: how ncclSend, ncclAllReduce, ... reach a stream.
//
// Written from the NCCL User Guide: "Group Calls" (usage and API: "Management Of Multiple GPUs From
// One Thread", "Aggregated Operations", "Nonblocking Group Operation"), "CUDA Stream Semantics" and
// "Point-to-point communication" (operations fused in a group progress together).
//
// A call is checked at once (a bad argument returns its error; inside a group it also fails the
// whole group, which then issues nothing). Outside a group it is issued at once; inside, at the
// outer ncclGroupEnd. Issuing numbers each call in issue order (which is what matches the n-th send
// to the n-th receive) and queues one task per rank and stream on that stream: the host never
// waits for peers here, the stream does. Inits deferred by a group start at the outer ncclGroupEnd;
// it waits for the blocking ones and returns ncclInProgress for non-blocking ones.
//
// Not modelled: ncclGroupSimulateEnd, and the ordering NCCL adds between different streams of one
// group (each stream's task here runs on its own stream only).
#include "core/cuda/emulator/nccl_internal.h"
#include "core/cuda/emulator/runtime.h"

using namespace brigade::emu::nccl;

namespace brigade::emu::nccl {
namespace {

struct Pending {
  std::shared_ptr<Rank> rank;
  cudaStream_t stream;
  CallArgs args;
};

// What this thread has gathered since its outer ncclGroupStart.
struct GroupState {
  int depth = 0;
  std::vector<Pending> calls;
  std::vector<std::shared_ptr<Rank>> inits;
  ncclResult_t failed = ncclSuccess;
};

thread_local GroupState group;

bool is_p2p(Kind kind) { return kind == Kind::send || kind == Kind::recv; }

// The device memory a call touches, for the race detector.
void add_accesses(const CallArgs& args, std::vector<brigade::emu::Access>& accesses) {
  if (args.send != nullptr) accesses.push_back({args.send, false});
  if (args.recv != nullptr) accesses.push_back({args.recv, true});
}

// Queues one task: the calls of one rank on one stream.
void enqueue_task(const std::vector<const Pending*>& calls) {
  const std::shared_ptr<Rank>& rank = calls.front()->rank;
  auto steps = std::make_shared<Steps>();
  std::string what;
  std::vector<brigade::emu::Access> accesses;
  {
    std::lock_guard<std::mutex> lock(rank->world->mutex);
    for (const Pending* call : calls) {
      steps->push_back(is_p2p(call->args.kind) ? make_p2p_step(*rank, call->args)
                                               : make_collective_step(*rank, call->args));
      what += (what.empty() ? "" : ", ") + describe(call->args);
      add_accesses(call->args, accesses);
    }
    ++rank->outstanding;
  }
  what = (calls.size() > 1 ? "ncclGroupEnd of " : "") + what + " on " + rank->name();
  // NCCL launches on the communicator's device; the legacy stream (nullptr) is that device's.
  const int previous = brigade::emu::current_device();
  if (previous != rank->device) cudaSetDevice(rank->device);
  brigade::emu::enqueue(calls.front()->stream, what, std::move(accesses),
                        [rank, steps] { return run_task(rank, *steps); });
  if (previous != rank->device) cudaSetDevice(previous);
}

// One task per (rank, stream), in the order of their first calls.
void issue(const std::vector<Pending>& calls) {
  std::vector<std::vector<const Pending*>> tasks;
  for (const Pending& call : calls) {
    auto same = [&](const std::vector<const Pending*>& task) {
      return task.front()->rank == call.rank && task.front()->stream == call.stream;
    };
    auto it = std::find_if(tasks.begin(), tasks.end(), same);
    if (it == tasks.end()) tasks.push_back({&call});
    else it->push_back(&call);
  }
  for (const auto& task : tasks) enqueue_task(task);
}

// "" when the call may be issued on this rank and stream, else why not (and `code`).
std::string check(const Rank& rank, cudaStream_t stream, const CallArgs& args, ncclResult_t* code) {
  *code = ncclInvalidUsage;
  if (!rank.ready) return "the communicator is not initialised yet (poll ncclCommGetAsyncError until ncclSuccess)";
  *code = ncclInvalidArgument;
  if (rank.jobs > 0) return kBusy;
  if (stream != nullptr && brigade::emu::stream_device(stream) != rank.device)
    return "the stream belongs to device " + std::to_string(brigade::emu::stream_device(stream)) +
           ", the communicator to device " + std::to_string(rank.device);
  if (dtype_size(args.dtype) == 0) return "datatype " + std::to_string(int(args.dtype)) + " is not modelled by the emulator";
  if (int(args.op) < 0 || int(args.op) >= int(ncclNumOps)) return "reduction " + std::to_string(int(args.op)) + " is not modelled";
  const bool rooted = args.kind == Kind::broadcast || args.kind == Kind::reduce;
  if ((is_p2p(args.kind) || rooted) && (args.peer < 0 || args.peer >= rank.nranks))
    return std::string(is_p2p(args.kind) ? "peer " : "root ") + std::to_string(args.peer) + " is not a rank of " +
           std::to_string(rank.nranks);
  const bool sends = args.kind != Kind::recv && (args.kind != Kind::broadcast || args.peer == rank.rank);
  const bool receives = args.kind != Kind::send && (args.kind != Kind::reduce || args.peer == rank.rank);
  if (args.count > 0 && ((sends && args.send == nullptr) || (receives && args.recv == nullptr)))
    return "a NULL buffer";
  return "";
}

}  // namespace

bool in_group() { return group.depth > 0; }

void defer_init(const std::shared_ptr<Rank>& rank) { group.inits.push_back(rank); }

ncclResult_t submit(ncclComm_t comm, cudaStream_t stream, const CallArgs& args) {
  ncclResult_t code = ncclInvalidArgument;
  std::string problem = "comm is NULL";
  std::shared_ptr<Rank> rank;
  if (comm != nullptr) {
    rank = rank_of(comm);
    std::lock_guard<std::mutex> lock(rank->world->mutex);
    problem = check(*rank, stream, args, &code);
  }
  if (!problem.empty()) {
    if (group.depth > 0 && group.failed == ncclSuccess) group.failed = code;
    return fail(code, describe(args) + (rank ? " on " + rank->name() : "") + ": " + problem);
  }
  if (group.depth > 0) group.calls.push_back({rank, stream, args});
  else issue({{rank, stream, args}});
  return ncclSuccess;
}

}  // namespace brigade::emu::nccl

// ncclGroupStart: calls until the matching ncclGroupEnd are gathered, not issued; groups nest.
ncclResult_t ncclGroupStart() {
  ++group.depth;
  return ncclSuccess;
}

// ncclGroupEnd: the outer one issues everything gathered (and starts deferred inits). It returns
// once the operations are queued on their streams — not done: that is the streams' business.
ncclResult_t ncclGroupEnd() {
  if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  GroupState mine = std::move(group);
  group = GroupState{};
  if (mine.failed != ncclSuccess) {
    for (const std::shared_ptr<Rank>& rank : mine.inits) {
      std::lock_guard<std::mutex> lock(rank->world->mutex);
      set_async_error(*rank, mine.failed, "ncclGroupEnd: a call of the group failed, so this init did not run");
      --rank->jobs;
    }
    return mine.failed;
  }
  for (const std::shared_ptr<Rank>& rank : mine.inits) launch_job(rank, [rank] { initialise(rank); });
  issue(mine.calls);
  ncclResult_t result = ncclSuccess;
  bool in_progress = false;
  for (const std::shared_ptr<Rank>& rank : mine.inits) {
    if (!rank->blocking) {
      in_progress = true;
      continue;
    }
    const ncclResult_t e = wait_for_jobs(*rank);
    if (result == ncclSuccess) result = e;
  }
  if (result != ncclSuccess) return result;
  return in_progress ? ncclInProgress : ncclSuccess;
}
