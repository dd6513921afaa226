// The emulated NCCL's communicators: unique ids, init (blocking and non-blocking), finalize,
// destroy, abort, and the queries (ncclCommCount, ncclCommCuDevice, ncclCommUserRank).
//
// Written from the NCCL User Guide: "Communicator Creation and Management Functions" (API), and in
// "Using NCCL": "Creating a Communicator", "Finalizing a communicator", "Destroying a communicator",
// "Error handling and communicator abort", and "Group Calls" ("Nonblocking Group Operation").
//
// A communicator belongs to the CUDA device current when it is initialised. Init is a job on a
// background thread (publish this rank in the rendezvous, wait for the others): a blocking call
// waits for it, a non-blocking one (config.blocking = 0) returns ncclInProgress and
// ncclCommGetAsyncError says ncclInProgress until it is done; inside ncclGroupStart/End it starts at
// the outer ncclGroupEnd, so one thread can create every rank. Not modelled: the config's tuning
// fields (CTAs, cluster size, net name, ...), which only change speed, ncclCommShrink, ncclCommRevoke,
// buffer registration and windows.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "emulator/nccl_internal.h"
#include "emulator/runtime.h"

using namespace brigade::emu::nccl;

namespace brigade::emu::nccl {
namespace {

constexpr char kIdPrefix[] = "brigade-emulated-nccl ";

bool parse_id(const ncclUniqueId& id, std::string* path) {
  const size_t prefix = sizeof kIdPrefix - 1;
  if (std::memcmp(id.internal, kIdPrefix, prefix) != 0) return false;
  const char* end = static_cast<const char*>(std::memchr(id.internal, '\0', sizeof id.internal));
  if (end == nullptr) return false;
  *path = std::string(id.internal + prefix, end);
  return !path->empty();
}

std::string list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

// Joins the rank's background jobs (they end promptly once it is aborted or done).
void join_jobs(Rank& rank) {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(rank.world->mutex);
    threads.swap(rank.threads);
  }
  for (std::thread& t : threads)
    if (t.get_id() != std::this_thread::get_id()) t.join();
    else t.detach();
}

// The rank is no longer a member of its world here; its files say it left.
void retire(ncclComm_t comm) {
  Rank& rank = *comm->rank;
  World& world = *rank.world;
  {
    std::lock_guard<std::mutex> lock(world.mutex);
    if (world.members[size_t(rank.rank)] == &rank) world.members[size_t(rank.rank)] = nullptr;
    world.bump();
  }
  join_jobs(rank);
  leave(world, rank.rank);
  delete comm;
}

ncclResult_t init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config,
                       const std::string& call) {
  if (comm == nullptr) return fail(ncclInvalidArgument, call + ": comm is NULL");
  *comm = nullptr;
  if (config != nullptr && config->magic != 0xcafebeef)
    return fail(ncclInvalidArgument, call + ": the config was not set from NCCL_CONFIG_INITIALIZER");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, call + ": rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  std::string path;
  if (!parse_id(id, &path)) return fail(ncclInvalidArgument, call + ": the unique id does not come from ncclGetUniqueId");
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)
    return fail(ncclUnhandledCudaError, call + ": no emulated GPU (BRIGADE_EMULATED_GPUS=0)");
  std::shared_ptr<World> world = find_world(path, nranks);
  if (!world) return fail(ncclInvalidArgument, call + ": other ranks of this unique id gave another nranks than " +
                                                   std::to_string(nranks));
  std::string why;
  std::shared_ptr<Rank> r = make_rank(world, rank, brigade::emu::current_device(), blocking_of(config, true), &why);
  if (!r) return fail(ncclInvalidUsage, call + ": " + why);
  *comm = make_handle(r);
  if (in_group()) {
    defer_init(r);
    return ncclSuccess;
  }
  launch_job(r, [r] { initialise(r); });
  if (!r->blocking) return ncclInProgress;
  return wait_for_jobs(*r);
}

}  // namespace

bool blocking_of(const ncclConfig_t* config, bool otherwise) {
  if (config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT) return otherwise;
  return config->blocking != 0;
}

Rank::~Rank() {
  for (std::thread& t : threads)
    if (t.joinable()) t.detach();  // not reached when destroy or abort ran first
}

std::shared_ptr<Rank> rank_of(ncclComm_t comm) { return comm->rank; }

ncclComm_t make_handle(std::shared_ptr<Rank> rank) { return new ncclComm{std::move(rank)}; }

std::shared_ptr<Rank> make_rank(const std::shared_ptr<World>& world, int rank, int device, bool blocking,
                                std::string* why) {
  std::lock_guard<std::mutex> lock(world->mutex);
  if (world->members[size_t(rank)] != nullptr) {
    *why = "rank " + std::to_string(rank) + " of " + world->short_name() + " is already taken in this process";
    return nullptr;
  }
  auto r = std::make_shared<Rank>();
  r->world = world;
  r->rank = rank;
  r->nranks = world->nranks;
  r->device = device;
  r->blocking = blocking;
  r->jobs = 1;  // its init
  r->sends_issued.assign(size_t(world->nranks), 0);
  r->recvs_issued.assign(size_t(world->nranks), 0);
  r->send_connected.assign(size_t(world->nranks), 0);
  r->recv_connected.assign(size_t(world->nranks), 0);
  // NCCL_RUNTIME_CONNECT=0 connects every collective algorithm during init (init.cc), which is a
  // rendezvous of all ranks anyway: nothing is left for a collective's first use.
  r->algorithm_connected.assign(size_t(kAlgorithms), runtime_connect() ? 0 : 1);
  world->members[size_t(rank)] = r.get();
  return r;
}

bool poll_until(Rank& rank, double seconds, const std::function<bool()>& try_once, const Rank* also_stop) {
  World& world = *rank.world;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (try_once()) return true;
    std::unique_lock<std::mutex> lock(world.mutex);
    if (rank.aborted || (also_stop && also_stop->aborted)) return false;
    if (seconds >= 0 && std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(seconds)) return false;
    world.changed.wait_for(lock, std::chrono::milliseconds(2));
  }
}

void initialise(const std::shared_ptr<Rank>& rank, const Rank* also_stop) {
  World& world = *rank->world;
  const std::string problem = publish_member(world, rank->rank, rank->device);
  if (!problem.empty()) {
    std::lock_guard<std::mutex> lock(world.mutex);
    return set_async_error(*rank, ncclInvalidUsage, "ncclCommInitRank of " + rank->name() + ": " + problem);
  }
  std::vector<int> missing;
  const bool met = poll_until(*rank, bootstrap_timeout_seconds(), [&] {
    missing = locate_members(world);
    return missing.empty();
  }, also_stop);
  std::lock_guard<std::mutex> lock(world.mutex);
  if (met) {
    // One machine, one set of GPUs: device d is the same GPU in every process. NCCL refuses two
    // ranks of a communicator on one GPU ("Duplicate GPU detected"), unless it is 2.30.3 or newer
    // and NCCL_MULTI_RANK_GPU_ENABLE=1 asks for it (NCCL 2.30 release notes).
    const char* multi = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    const bool shared_ok = NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 3) && multi != nullptr && std::string(multi) == "1";
    for (int r = 0; r < world.nranks && !shared_ok; ++r) {
      if (r == rank->rank || world.devices[size_t(r)] != rank->device) continue;
      return set_async_error(*rank, ncclInvalidUsage,
                             "ncclCommInitRank of " + rank->name() + ": Duplicate GPU detected: rank " +
                                 std::to_string(std::min(r, rank->rank)) + " and rank " +
                                 std::to_string(std::max(r, rank->rank)) + " both on CUDA device " +
                                 std::to_string(rank->device) +
                                 " (several ranks per GPU need NCCL >= 2.30.3 and NCCL_MULTI_RANK_GPU_ENABLE=1)");
    }
    rank->ready = true;
  } else if (!rank->aborted && !(also_stop && also_stop->aborted)) {
    set_async_error(*rank, ncclSystemError,
                    "ncclCommInitRank of " + rank->name() + ": rank(s) " + list(missing) + " did not join within " +
                        std::to_string(int(bootstrap_timeout_seconds())) + " s (rendezvous " + world.path + ")");
  }
}

void launch_job(const std::shared_ptr<Rank>& rank, std::function<void()> job) {
  std::lock_guard<std::mutex> lock(rank->world->mutex);
  rank->threads.emplace_back([rank, job = std::move(job)] {
    job();
    std::lock_guard<std::mutex> done(rank->world->mutex);
    --rank->jobs;
    rank->world->bump();
  });
}

ncclResult_t wait_for_jobs(Rank& rank) {
  std::unique_lock<std::mutex> lock(rank.world->mutex);
  rank.world->changed.wait(lock, [&] { return rank.jobs == 0 || rank.aborted; });
  return rank.error;
}

}  // namespace brigade::emu::nccl

// ---- the API: "Communicator Creation and Management Functions" ----------------------------------

// ncclGetVersion: the version of the header we were built against (NCCL_VERSION_CODE), as the real
// library reports its own.
ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

// ncclGetUniqueId: the id carries a fresh rendezvous directory, as NCCL's carries its bootstrap
// root's address; the directory is made by the first rank to initialise.
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  const std::string text = kIdPrefix + new_rendezvous_path();
  if (text.size() >= sizeof id->internal)
    return fail(ncclSystemError, "ncclGetUniqueId: the rendezvous path " + text + " does not fit in 128 bytes (set a shorter TMPDIR)");
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, text.data(), text.size());
  return ncclSuccess;
}

// ncclCommInitRank: blocking; collective over the nranks ranks of `id`.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return init_rank(comm, nranks, id, rank, nullptr, "ncclCommInitRank");
}

// ncclCommInitRankConfig: like ncclCommInitRank; config.blocking = 0 makes it non-blocking.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  return init_rank(comm, nranks, id, rank, config, "ncclCommInitRankConfig");
}

// ncclCommInitAll: one rank per device of `devlist` (0..ndev-1 when NULL), from this thread —
// ncclGetUniqueId plus ncclCommInitRank for each, inside a group.
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return fail(ncclInvalidArgument, "ncclCommInitAll: no communicators asked for");
  ncclUniqueId id;
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) return result;
  const int previous = brigade::emu::current_device();
  ncclGroupStart();
  for (int i = 0; i < ndev && result == ncclSuccess; ++i) {
    if (cudaSetDevice(devlist ? devlist[i] : i) != cudaSuccess)
      result = fail(ncclInvalidArgument, "ncclCommInitAll: no device " + std::to_string(devlist ? devlist[i] : i));
    else result = ncclCommInitRank(&comms[i], ndev, id, i);
  }
  const ncclResult_t ended = ncclGroupEnd();
  cudaSetDevice(previous);
  return result != ncclSuccess ? result : ended;
}

// ncclCommFinalize: flushes the rank's issued operations. Non-blocking communicators return
// ncclInProgress and ncclCommGetAsyncError says when it is done.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  std::shared_ptr<Rank> rank = rank_of(comm);
  {
    std::lock_guard<std::mutex> lock(rank->world->mutex);
    ++rank->jobs;
  }
  auto flush = [rank] {
    poll_until(*rank, -1, [&] {
      std::lock_guard<std::mutex> lock(rank->world->mutex);
      return rank->outstanding == 0;
    });
  };
  if (!rank->blocking) {
    launch_job(rank, flush);
    return ncclInProgress;
  }
  flush();
  std::lock_guard<std::mutex> lock(rank->world->mutex);
  --rank->jobs;
  rank->world->bump();
  return rank->error;
}

// ncclCommDestroy: frees the rank; without ncclCommFinalize first it flushes as finalize does
// (and, like NCCL, waits for ever for an operation that never completes: abort those instead).
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  Rank& rank = *comm->rank;
  {
    std::unique_lock<std::mutex> lock(rank.world->mutex);
    rank.world->changed.wait(lock, [&] { return (rank.jobs == 0 && rank.outstanding == 0) || rank.aborted; });
  }
  retire(comm);
  return ncclSuccess;
}

// ncclCommAbort: ends every operation of this rank that has not completed (the blocked tasks wake
// and end; queued ones end as soon as their stream reaches them) and frees the rank. Peers waiting
// for it see ncclRemoteError. The last error then says what this rank was waiting for.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  Rank& rank = *comm->rank;
  World& world = *rank.world;
  {
    std::unique_lock<std::mutex> lock(world.mutex);
    std::string waits;
    for (const Waiter* w : world.waiters)
      if (w->rank == rank.rank) waits += (waits.empty() ? "" : "; ") + w->waits;
    if (!rank.connecting.empty() && waits.find(rank.connecting) == std::string::npos) waits += (waits.empty() ? "" : "; ") + rank.connecting;
    if (!waits.empty()) set_last_error("ncclCommAbort on " + rank.name() + ": it was waiting in " + waits);
    rank.aborted = true;
    world.peer_aborted[size_t(rank.rank)] = 1;
    world.bump();
    // The tasks wake, see the abort and end: wait for that, so the stream is free when we return.
    world.changed.wait_for(lock, std::chrono::seconds(10), [&] { return rank.running == 0; });
  }
  publish_abort(world, rank.rank);
  retire(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(ncclInvalidArgument, "ncclCommCount: a NULL argument");
  *count = comm->rank->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return fail(ncclInvalidArgument, "ncclCommCuDevice: a NULL argument");
  *device = comm->rank->device;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(ncclInvalidArgument, "ncclCommUserRank: a NULL argument");
  *rank = comm->rank->rank;
  return ncclSuccess;
}
