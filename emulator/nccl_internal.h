// The CUDA emulator's NCCL: what its files share (internal to emulator/nccl_*.cpp).
//
// Model. A communicator is a World (one per rendezvous, per process) in which each rank of this
// process has a Rank, the object behind ncclComm_t. Ranks exchange Messages through mailboxes
// (nccl_transport.cpp): a message between two ranks of this process stays in memory; one to or from
// another process is a file in the rendezvous directory that the unique id names.
//
// Work. Every group of operations of one rank on one stream becomes one task, queued with
// brigade::emu::enqueue. When the stream runs it, its Steps (a send, a receive, a collective) all
// progress together (nccl_task.cpp) until they are done, fail, or ncclCommAbort ends them. A task
// that cannot move registers as a Waiter; when every rank of a communicator that lives wholly in
// this process waits, nothing can ever move again and the deadlock is reported — the tasks keep
// waiting, as a GPU would, until the communicator is aborted.
//
// Errors. NCCL-level problems (a mismatched send and receive, a deadlock, a peer that aborted) are
// the communicator's asynchronous error (ncclCommGetAsyncError, ncclGetLastError); the stream sees no
// CUDA error for them, just as ncclCommAbort ends NCCL's kernels cleanly on a GPU. A buffer outside
// the communicator's device memory is a CUDA fault (an illegal address): the work returns it.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace brigade::emu::nccl {

// ---- data types and operations (nccl_collectives.cpp) ----
size_t dtype_size(ncclDataType_t dtype);       // 0 for types the emulator does not model (fp8)
std::string dtype_name(ncclDataType_t dtype);  // "f32", "bf16"
std::string op_name(ncclRedOp_t op);           // "sum", "avg"
// out[i] = parts[0][i] op parts[1][i] op ... in rank order, element by element, in the type's own
// arithmetic (f16 and bf16 round after every step, as a GPU's ring does). ncclAvg is NCCL's: for
// floating types each part times 1/n, then summed; for integers the sum divided by n. The same parts
// give the same bits on every rank (NCCL's order of addition differs: nccl_types.cpp).
void reduce(void* out, const std::vector<const char*>& parts, size_t count, ncclDataType_t dtype, ncclRedOp_t op);

// ---- messages ----
enum class Kind : int32_t { send, recv, ack, all_reduce, broadcast, reduce, all_gather, reduce_scatter, split, connect };
std::string kind_name(Kind kind);  // "ncclSend", "ncclAllReduce"

// What travels in front of a message's bytes: the sender's call, so the receiver can check it
// against its own. Plain data: it is written to files as it is (both ends run the same binary).
struct Envelope {
  Kind kind = Kind::send;
  int32_t dtype = 0;
  uint64_t count = 0;
  int32_t op = 0;       // collectives: the reduction; split: the color; connect: send channels
  int32_t root = 0;     // broadcast and reduce: the root; split: the key; connect: receive channels
  int32_t refused = 0;  // an ack: the receiver refused the message (its count or type differ)
};

struct Message {
  Envelope envelope;
  std::vector<char> data;
};

// ---- communicators ----
struct World;

// One rank's share of a communicator: what ncclComm_t points to (through struct ncclComm).
// Everything mutable is guarded by world->mutex.
struct Rank {
  std::shared_ptr<World> world;
  int rank = 0;
  int nranks = 0;
  int device = 0;
  bool blocking = true;
  bool ready = false;    // init done: operations may be issued
  std::atomic<bool> aborted{false};  // ncclCommAbort: every task and job of this rank ends
  ncclResult_t error = ncclSuccess;  // the first asynchronous error; it sticks
  std::string last_error;
  int jobs = 0;         // init, split or finalize still under way (ncclInProgress)
  int running = 0;      // tasks running on their streams now, and link setups waiting for a message
  int outstanding = 0;  // tasks issued and not finished (ncclCommFinalize waits for them)
  // Issue order, for matching: our n-th send to a peer meets that peer's n-th receive from us.
  std::vector<uint64_t> sends_issued, recvs_issued;
  uint64_t collectives_issued = 0, splits_issued = 0;
  // Point-to-point links set up so far (nccl_connect.cpp), per peer: sending to it, receiving from it.
  std::vector<char> send_connected, recv_connected;
  // Collective algorithms connected so far, per Algorithm (nccl_connect.cpp).
  std::vector<char> algorithm_connected;
  // Setup messages sent to and taken from each (peer, tag), numbered so that repeated setups meet
  // in order, as they would on NCCL's bootstrap sockets.
  std::map<std::pair<int, int>, uint64_t> boot_sent, boot_taken;
  std::string connecting;  // what a setup under way waits for ("" when none), for ncclCommAbort's text
  std::vector<std::thread> threads;  // background jobs, joined at destroy and abort

  ~Rank();
  std::string name() const;  // "rank 1 of 4 (brigade-nccl-1234-0-...)"
};

// A task that cannot move: its rank, what it waits for, and the generation it last looked at.
struct Waiter {
  int rank = 0;
  uint64_t generation = 0;
  std::string waits;  // "ncclRecv from rank 1 (count 8, f32)"
  int setup_peer = -1;  // a link setup (nccl_connect.cpp): the rank whose message it waits for
};

struct World {
  std::string path;  // the rendezvous directory, from the unique id; it names the world
  int nranks = 0;
  std::mutex mutex;
  std::condition_variable changed;  // notified at every generation bump
  uint64_t generation = 0;          // bumped by everything a waiting task may care about
  std::map<std::string, Message> mail;  // messages between ranks of this process, by key
  std::vector<Rank*> members;      // ranks of this process by rank (nullptr: remote, gone, not yet)
  std::vector<char> local;         // per rank: lives in this process (once located)
  std::vector<int> devices;        // per rank: its CUDA device (once located)
  bool located = false;
  bool all_local = false;
  std::vector<char> peer_aborted;  // per rank: called ncclCommAbort (a rank of this process)
  std::vector<Waiter*> waiters;
  uint64_t deadlock_reported_at = ~uint64_t(0);

  std::string short_name() const;  // the directory's base name
  void bump() {                    // with mutex held
    ++generation;
    changed.notify_all();
  }
};

// ---- the transport (nccl_transport.cpp); none of these may be called with world.mutex held ----
std::string new_rendezvous_path();  // a fresh, unique directory name under $TMPDIR (not created)
// This process's World for `path`, made on first use; nullptr if it exists with another size.
std::shared_ptr<World> find_world(const std::string& path, int nranks);
// "" once rank `rank` (on CUDA device `device`) is published in the rendezvous directory, else why not.
std::string publish_member(World& world, int rank, int device);
// The ranks not yet published; when there are none, fills in world.local and world.devices (once).
std::vector<int> locate_members(World& world);
// Sends `message` from rank `from` to rank `to` under `key` (memory or file).
void post(World& world, int from, int to, const std::string& key, Message message);
// Takes the message from `from` to `to` under `key`, if it has arrived.
bool fetch(World& world, int from, int to, const std::string& key, Message* message);
void publish_abort(World& world, int rank);  // so that peers in other processes see it
bool remote_aborted(World& world, int rank);
// Rank `rank` leaves for good; the last one out removes the directory.
void leave(World& world, int rank);
// How long init and split wait for the other ranks (BRIGADE_EMULATED_NCCL_TIMEOUT seconds, 300).
double bootstrap_timeout_seconds();

// ---- errors (nccl_comm.cpp) ----
// Records `code` and `text` as `rank`'s asynchronous error (the first one sticks) and as the
// process's last error; with world->mutex held.
void set_async_error(Rank& rank, ncclResult_t code, const std::string& text);
void set_last_error(const std::string& text);  // what ncclGetLastError returns next
// Records `text` as the last error and returns `code`: a call's synchronous error.
ncclResult_t fail(ncclResult_t code, const std::string& text);

// ---- the rank behind a handle, and bootstrapping (nccl_comm.cpp) ----
std::shared_ptr<Rank> rank_of(ncclComm_t comm);
ncclComm_t make_handle(std::shared_ptr<Rank> rank);
// A new Rank of `world` (registered there), or nullptr when that rank is taken (`why` says so).
std::shared_ptr<Rank> make_rank(const std::shared_ptr<World>& world, int rank, int device, bool blocking,
                                std::string* why);
// The init job: publish this rank, wait for every other, then the rank is ready. A split's child
// also stops when its parent (`also_stop`) is aborted.
void initialise(const std::shared_ptr<Rank>& rank, const Rank* also_stop = nullptr);
// Calls `try_once` (without the lock) until it returns true; false if the rank (or `also_stop`)
// is aborted or `seconds` pass first (never, when negative). Naps between tries: other
// processes' files change without telling us.
bool poll_until(Rank& rank, double seconds, const std::function<bool()>& try_once, const Rank* also_stop = nullptr);
bool blocking_of(const ncclConfig_t* config, bool otherwise);  // config.blocking, else `otherwise`
// Runs `job` on a background thread of `rank`; the caller has counted it in rank.jobs already,
// and the thread uncounts it when the job is done.
void launch_job(const std::shared_ptr<Rank>& rank, std::function<void()> job);
// Blocks until rank.jobs is 0 (or the rank is aborted); returns its asynchronous error.
ncclResult_t wait_for_jobs(Rank& rank);

struct CallArgs;

// ---- first-use link setup (nccl_connect.cpp) ----
// Whether a group's tasks may start: every link setup of the group is over. One gate per group,
// shared by all its communicators (so it has a lock of its own, not a World's): NCCL joins every
// communicator's setup job of a group before it launches any of the group's kernels.
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;  // notified when a setup ends
  int pending = 0;                  // setups not over yet
  bool failed = false;              // one failed or its rank was aborted
  ncclResult_t error = ncclSuccess;  // the first failed setup's error (ncclSuccess: it was aborted)
  std::string failed_rank;           // its rank's name
};
// The collective algorithms the emulator tells apart for their first-use connection: NCCL connects
// each algorithm's channels once per communicator (nccl_connect.cpp says how it picks one).
enum class Algorithm : int { ring, tree };
inline constexpr int kAlgorithms = 2;
std::string algorithm_name(Algorithm algorithm);  // "ring"
// The algorithm NCCL would run the collective `args` with, coarsely: by kind and size.
Algorithm algorithm_of(const CallArgs& args);
// Whether collectives connect at their first use (NCCL_RUNTIME_CONNECT, default 1) or at init (0).
bool runtime_connect();
// What a setup job connects: per peer, the links `send` and `recv` (1 when the group uses it and it
// is not connected yet), then per Algorithm the collectives' channels (1: connect it now).
struct Connect {
  std::vector<char> send, recv, algorithms;
};
// Starts the setup `what` as a job of `rank`, which the caller has counted in rank->jobs and in
// gate->pending (all of a group's setups before any starts, so the gate cannot open early).
void start_connect(const std::shared_ptr<Rank>& rank, Connect what, const std::shared_ptr<Gate>& gate);
// Until `gate` opens or the rank is aborted (no lock held). True when the tasks may run; when
// another communicator's setup of the group failed, records that on `rank` too (nothing of the
// group runs, as in NCCL).
bool wait_for_gate(Rank& rank, const std::shared_ptr<Gate>& gate);

// ---- tasks (nccl_task.cpp) ----
struct StepResult {
  bool moved = false;  // done, or closer to it
  ncclResult_t error = ncclSuccess;
  std::string text;
};

// One send, receive or collective of a task.
class Step {
 public:
  virtual ~Step() = default;
  // Checks the buffers and posts what goes out: "" or a CUDA fault (an illegal address).
  virtual std::string start(Rank& rank) = 0;
  virtual StepResult poll(Rank& rank) = 0;
  virtual bool done() const = 0;
  virtual std::string waits() const = 0;         // what it still waits for, for reports
  virtual std::vector<int> awaited() const = 0;  // the ranks it still waits for
};

using Steps = std::vector<std::unique_ptr<Step>>;
// The work of one task on its stream: "" (NCCL errors go to the communicator) or a CUDA fault.
// Its steps start once `gate` (null: none) opens; if the link setup failed they never do.
std::string run_task(const std::shared_ptr<Rank>& rank, Steps& steps, const std::shared_ptr<Gate>& gate);
// With world.mutex held: reports a deadlock (every rank's running tasks and setups are Waiters of
// the current generation) as every rank's asynchronous error, once per stuck state.
void check_deadlock(World& world);

// ---- issuing (nccl_group.cpp) ----
// One call of ncclSend, ncclAllReduce, ...
struct CallArgs {
  Kind kind = Kind::send;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int peer = 0;  // send and receive: the peer; broadcast and reduce: the root
};
std::string describe(const CallArgs& args);  // "ncclSend to rank 1 (count 8, f32)"

// NCCL's words (ncclCommEnsureReady) for a call on a communicator whose init, split or finalize is
// still under way: refused with ncclInvalidArgument.
inline constexpr const char* kBusy =
    "Attempt to use communicator before the previous operation returned ncclSuccess (poll ncclCommGetAsyncError)";

// Checks what every operation needs (a ready communicator, a stream of its device, a modelled
// type); then queues the call, now or at the outer ncclGroupEnd. A failed check inside a group
// fails the whole group.
ncclResult_t submit(ncclComm_t comm, cudaStream_t stream, const CallArgs& args);
// The step of a call, numbered in issue order (world->mutex held).
std::unique_ptr<Step> make_p2p_step(Rank& rank, const CallArgs& args);
std::unique_ptr<Step> make_collective_step(Rank& rank, const CallArgs& args);
// Inside ncclGroupStart/End, an init is deferred to the outer ncclGroupEnd (it must not block).
bool in_group();
void defer_init(const std::shared_ptr<Rank>& rank);

}  // namespace brigade::emu::nccl

// The object behind ncclComm_t (nccl.h declares the struct and leaves it to the library).
struct ncclComm {
  std::shared_ptr<brigade::emu::nccl::Rank> rank;
};
