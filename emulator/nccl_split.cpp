// The emulated NCCL's ncclCommSplit.
//
// Written from the NCCL User Guide: ncclCommSplit ("Communicator Creation and Management
// Functions"), "Creating more communicators" and "Nonblocking Group Operation". Every rank of the
// parent calls it, in the same order as its other splits; ranks with the same color form a child
// communicator, ordered by key and then by parent rank; NCCL_SPLIT_NOCOLOR joins none and gets
// NULL. The child lives on the parent's device and takes `config` (the parent's when NULL).
//
// The split is a job of the parent: the ranks tell each other their color and key through the
// parent's mailboxes (not stream-ordered: NCCL's split does not wait for queued work either), then
// the child initialises through its own rendezvous, a directory beside the parent's named after the
// split and color. A blocking split waits for the job. A non-blocking one returns ncclSuccess at
// once, as NCCL 2.28.9 and 2.30.7 do (src/init.cc: ncclCommSplit's NCCLCHECK passes over its group
// end's ncclInProgress; seen on an H200 too), although the job still runs: ncclCommGetAsyncError on
// the parent says ncclInProgress until it is done, any other call on the parent meanwhile is refused
// (ncclCommEnsureReady: "Attempt to use communicator before the previous operation returned
// ncclSuccess", ncclInvalidArgument), and only then is *newcomm written (NULL until then, and for
// NCCL_SPLIT_NOCOLOR).
//
// Not modelled: splitShare (sharing the parent's resources changes nothing here).
#include <algorithm>

#include "emulator/nccl_internal.h"

using namespace brigade::emu::nccl;

namespace brigade::emu::nccl {
namespace {

std::string key(uint64_t split, int from, int to) {
  return "split." + std::to_string(split) + "." + std::to_string(from) + "." + std::to_string(to);
}

struct Choice {
  int color = 0;
  int key = 0;
  bool known = false;
};

// Tells every rank our color and key and learns theirs; false (error recorded) when that fails.
bool exchange(Rank& parent, uint64_t split, std::vector<Choice>& choices) {
  World& world = *parent.world;
  const int me = parent.rank;
  for (int q = 0; q < parent.nranks; ++q) {
    if (q == me) continue;
    Message message;
    message.envelope.kind = Kind::split;
    message.envelope.op = choices[size_t(me)].color;
    message.envelope.root = choices[size_t(me)].key;
    post(world, me, q, key(split, me, q), std::move(message));
  }
  std::vector<int> missing;
  const bool all = poll_until(parent, bootstrap_timeout_seconds(), [&] {
    missing.clear();
    for (int q = 0; q < parent.nranks; ++q) {
      Message message;
      Choice& c = choices[size_t(q)];
      if (!c.known && fetch(world, q, me, key(split, q, me), &message))
        c = {message.envelope.op, message.envelope.root, true};
      if (!c.known) missing.push_back(q);
    }
    return missing.empty();
  });
  if (all) return true;
  std::lock_guard<std::mutex> lock(world.mutex);
  if (!parent.aborted) {
    std::string ranks;
    for (int q : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
    set_async_error(parent, ncclSystemError,
                    "ncclCommSplit #" + std::to_string(split) + " on " + parent.name() + ": rank(s) " + ranks +
                        " did not call it within " + std::to_string(int(bootstrap_timeout_seconds())) + " s");
  }
  return false;
}

// The parent ranks of our color, in the child's order: by key, then by parent rank.
std::vector<int> members_of(const std::vector<Choice>& choices, int color) {
  std::vector<int> members;
  for (int q = 0; q < int(choices.size()); ++q)
    if (choices[size_t(q)].color == color) members.push_back(q);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return choices[size_t(a)].key < choices[size_t(b)].key; });
  return members;
}

// The whole split for one rank; writes *newcomm last (when there is a child).
ncclResult_t split_job(const std::shared_ptr<Rank>& parent, uint64_t split, int color, int key_, ncclComm_t* newcomm,
                       bool child_blocking) {
  std::vector<Choice> choices(size_t(parent->nranks));
  choices[size_t(parent->rank)] = {color, key_, true};
  if (!exchange(*parent, split, choices)) return ncclSystemError;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  const std::vector<int> members = members_of(choices, color);
  const int index = int(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  const std::string path =
      parent->world->path + ".split" + std::to_string(split) + ".color" + std::to_string(color);
  std::shared_ptr<World> world = find_world(path, int(members.size()));
  std::string why = "a communicator of another size already uses " + path;
  std::shared_ptr<Rank> child = world ? make_rank(world, index, parent->device, child_blocking, &why) : nullptr;
  if (!child) {
    std::lock_guard<std::mutex> lock(parent->world->mutex);
    set_async_error(*parent, ncclInternalError, "ncclCommSplit on " + parent->name() + ": " + why);
    return ncclInternalError;
  }
  initialise(child, parent.get());
  ncclResult_t result;
  {
    std::lock_guard<std::mutex> lock(world->mutex);
    --child->jobs;
    world->bump();
    result = child->error;
    if (result == ncclSuccess && !child->ready) result = ncclSystemError;  // the parent was aborted
  }
  *newcomm = make_handle(child);  // even when it failed: the caller aborts it
  return result;
}

}  // namespace
}  // namespace brigade::emu::nccl

// ncclCommSplit: see the file comment.
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) return fail(ncclInvalidArgument, "ncclCommSplit: a NULL argument");
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, "ncclCommSplit: color " + std::to_string(color) +
                                         " (colors are >= 0, or NCCL_SPLIT_NOCOLOR)");
  if (config != nullptr && config->magic != 0xcafebeef)
    return fail(ncclInvalidArgument, "ncclCommSplit: the config was not set from NCCL_CONFIG_INITIALIZER");
  std::shared_ptr<Rank> parent = rank_of(comm);
  // Whether the call waits is the parent's (the file comment); the child's own calls later follow
  // its config.
  const bool blocking = parent->blocking;
  const bool child_blocking = blocking_of(config, parent->blocking);
  uint64_t split;
  {
    std::lock_guard<std::mutex> lock(parent->world->mutex);
    if (!parent->ready) return fail(ncclInvalidUsage, "ncclCommSplit on " + parent->name() + ": not initialised yet");
    if (parent->jobs > 0) return fail(ncclInvalidArgument, "ncclCommSplit on " + parent->name() + ": " + kBusy);
    split = parent->splits_issued++;
    ++parent->jobs;
  }
  *newcomm = nullptr;
  if (!blocking) {
    launch_job(parent, [=] { split_job(parent, split, color, key, newcomm, child_blocking); });
    return ncclSuccess;
  }
  const ncclResult_t result = split_job(parent, split, color, key, newcomm, child_blocking);
  std::lock_guard<std::mutex> lock(parent->world->mutex);
  --parent->jobs;
  parent->world->bump();
  return result;
}
