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
// waits for peers here, the stream does — except for a link's or a collective algorithm's first use
// (nccl_connect.cpp, from NCCL's source): issuing starts the setup of every link and algorithm the
// calls use that is not connected yet, one job per rank, and waits for it on blocking communicators (non-blocking ones answer
// ncclInProgress). Inits deferred by a group start at the outer ncclGroupEnd; it waits for the
// blocking ones and returns ncclInProgress for non-blocking ones.
//
// A group's tasks are queued at ncclGroupEnd as before, but their steps start only once every setup
// of the group is done, on every communicator in it (one Gate). NCCL instead launches the kernels when the setup is over, so on a GPU
// CUDA work the host queues on that stream while a non-blocking setup runs would go before them;
// here it goes after. A program that waits for ncclSuccess before touching the stream, as the User
// Guide asks of non-blocking communicators, sees no difference.
//
// Not modelled: ncclGroupSimulateEnd, and the ordering NCCL adds between different streams of one
// group (each stream's task here runs on its own stream only).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "emulator/nccl_internal.h"
#include "emulator/runtime.h"

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

// Queues one task: the calls of one rank on one stream, which start once `gate` opens.
void enqueue_task(const std::vector<const Pending*>& calls, const std::shared_ptr<Gate>& gate) {
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
                        [rank, steps, gate] { return run_task(rank, *steps, gate); });
  if (previous != rank->device) cudaSetDevice(previous);
}

// Starts the setup of the links the calls use that are not connected yet, and of the collective
// algorithms they use that are not (nccl_connect.cpp), one job per rank (every job before any task
// is queued: a stream that runs work on the issuing thread waits for its gate there). Returns the
// group's gate (null when nothing is set up), and the ranks that set up in `connecting`. Every task
// of the group waits for every setup, as NCCL launches no kernel of a group before all its
// communicators' setup jobs are joined. An algorithm counts as connected from here on, as NCCL
// marks it while preparing the group (a later group does not set it up again).
std::shared_ptr<Gate> connect_links(const std::vector<Pending>& calls,
                                    std::vector<std::shared_ptr<Rank>>* connecting) {
  std::vector<std::shared_ptr<Rank>> ranks;
  std::vector<Connect> setups;
  for (const Pending& call : calls)
    if (std::find(ranks.begin(), ranks.end(), call.rank) == ranks.end()) ranks.push_back(call.rank);
  for (const std::shared_ptr<Rank>& rank : ranks) {
    Connect setup{std::vector<char>(size_t(rank->nranks), 0), std::vector<char>(size_t(rank->nranks), 0),
                  std::vector<char>(size_t(kAlgorithms), 0)};
    bool any = false;
    {
      std::lock_guard<std::mutex> lock(rank->world->mutex);
      for (const Pending& call : calls) {
        if (call.rank != rank) continue;
        if (!is_p2p(call.args.kind)) {
          const size_t a = size_t(algorithm_of(call.args));
          if (rank->nranks > 1 && !rank->algorithm_connected[a])
            setup.algorithms[a] = 1, rank->algorithm_connected[a] = 1, any = true;
          continue;
        }
        if (call.args.peer == rank->rank) continue;
        const size_t peer = size_t(call.args.peer);
        if (call.args.kind == Kind::send && !rank->send_connected[peer]) setup.send[peer] = 1, any = true;
        if (call.args.kind == Kind::recv && !rank->recv_connected[peer]) setup.recv[peer] = 1, any = true;
      }
      if (any) ++rank->jobs;
    }
    if (!any) continue;
    connecting->push_back(rank);
    setups.push_back(std::move(setup));
  }
  if (connecting->empty()) return nullptr;
  auto gate = std::make_shared<Gate>();
  gate->pending = int(connecting->size());  // all counted before the first starts
  for (size_t i = 0; i < connecting->size(); ++i) start_connect((*connecting)[i], std::move(setups[i]), gate);
  return gate;
}

// The link setups a group started: the ranks setting up, and the gate their tasks wait behind.
struct Setups {
  std::vector<std::shared_ptr<Rank>> ranks;
  std::shared_ptr<Gate> gate;  // null when nothing is set up
};

// One task per (rank, stream), in the order of their first calls. Returns the setups it started.
Setups issue(const std::vector<Pending>& calls) {
  std::vector<std::shared_ptr<Rank>> connecting;
  const std::shared_ptr<Gate> gate = connect_links(calls, &connecting);
  std::vector<std::vector<const Pending*>> tasks;
  for (const Pending& call : calls) {
    auto same = [&](const std::vector<const Pending*>& task) {
      return task.front()->rank == call.rank && task.front()->stream == call.stream;
    };
    auto it = std::find_if(tasks.begin(), tasks.end(), same);
    if (it == tasks.end()) tasks.push_back({&call});
    else it->push_back(&call);
  }
  for (const auto& task : tasks) enqueue_task(task, gate);
  return {std::move(connecting), gate};
}

// What a group (or a lone call) returns once it has started jobs: inits on `inits`, link setups
// in `setups`. A blocking rank waits for its jobs; a non-blocking one makes it ncclInProgress. An
// init answers with its rank's error. A setup answers with its own outcome, never the rank's
// asynchronous error: the group's tasks start the moment the gate opens, before the job that opened
// it is uncounted, and a task's error (a count mismatch found by the stream) is no error of the
// call that issued it — NCCL's ncclGroupEnd reports what failed while launching, not what the
// kernels find later. (Returning the rank's error here made a mismatch test flaky.)
ncclResult_t settle(const std::vector<std::shared_ptr<Rank>>& inits, const Setups& setups) {
  ncclResult_t result = ncclSuccess;
  bool in_progress = false;
  for (const std::shared_ptr<Rank>& rank : inits) {
    if (!rank->blocking) {
      in_progress = true;
      continue;
    }
    const ncclResult_t e = wait_for_jobs(*rank);
    if (result == ncclSuccess) result = e;
  }
  for (const std::shared_ptr<Rank>& rank : setups.ranks) {
    if (!rank->blocking) {
      in_progress = true;
      continue;
    }
    wait_for_jobs(*rank);
    ncclResult_t e = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(setups.gate->mutex);
      if (setups.gate->failed) e = setups.gate->error;
    }
    std::lock_guard<std::mutex> lock(rank->world->mutex);
    if (e == ncclSuccess && (setups.gate->failed || rank->aborted)) {
      // Cut short by an abort (this rank's, from another thread, or that of a rank whose setup the
      // group waits for): nothing ran, which success would hide. NCCL's setup, seeing its abort
      // flag, fails; ncclSystemError, as the emulator answers for an init or a split cut short by
      // an abort (nccl_split.cpp).
      e = fail(ncclSystemError, "ncclGroupEnd on " + rank->name() +
                                    ": the communicator was aborted while the group was set up; nothing ran");
    }
    if (result == ncclSuccess) result = e;
  }
  if (result != ncclSuccess) return result;
  return in_progress ? ncclInProgress : ncclSuccess;
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

// NCCL pairs a rank's sends to itself with its receives from itself, in order, within one group
// (enqueue.cc, the p2p scheduling: "Trying to send to self without a matching recv", and the
// converse), and refuses the group with ncclInvalidUsage when one is left over; the group's cleanup
// (group.cc, groupCleanup) also makes that the asynchronous error of every non-blocking communicator
// of the group. Returns the error's text, "" when every self-send of every rank has its receive.
std::string refuse_unmatched_self_transfers(const std::vector<Pending>& calls) {
  std::vector<std::pair<std::shared_ptr<Rank>, int>> balance;  // sends minus receives, per rank
  for (const Pending& call : calls) {
    if (!is_p2p(call.args.kind) || call.args.peer != call.rank->rank) continue;
    auto it = std::find_if(balance.begin(), balance.end(), [&](const auto& b) { return b.first == call.rank; });
    if (it == balance.end()) it = balance.insert(balance.end(), {call.rank, 0});
    it->second += call.args.kind == Kind::send ? 1 : -1;
  }
  for (const auto& [rank, sends] : balance) {
    if (sends == 0) continue;
    const std::string text = "ncclGroupEnd on " + rank->name() +
                             (sends > 0 ? ": trying to send to self without a matching recv"
                                        : ": trying to recv from self without a matching send");
    for (const Pending& call : calls) {  // every non-blocking communicator of the group
      std::lock_guard<std::mutex> lock(call.rank->world->mutex);
      if (!call.rank->blocking) set_async_error(*call.rank, ncclInvalidUsage, text);
    }
    return text;
  }
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
  if (group.depth > 0) {
    group.calls.push_back({rank, stream, args});
    return ncclSuccess;
  }
  const std::vector<Pending> lone = {{rank, stream, args}};  // a lone call is a group of its own
  if (const std::string unmatched = refuse_unmatched_self_transfers(lone); !unmatched.empty())
    return fail(ncclInvalidUsage, unmatched);
  return settle({}, issue(lone));
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
  if (const std::string unmatched = refuse_unmatched_self_transfers(mine.calls); !unmatched.empty()) {
    settle(mine.inits, Setups{});  // the group's inits still run, as NCCL's do
    return fail(ncclInvalidUsage, unmatched);
  }
  const Setups setups = issue(mine.calls);
  return settle(mine.inits, setups);
}
