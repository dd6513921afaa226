// Making NCCL communicators (comm/nccl.h): one rank per process through a store's rendezvous, or
// every rank in this process at once. Each is three NCCL communicators (nccl_communicator.h's lanes),
// created non-blocking and polled against the connect deadline.
#include "comm/nccl_communicator.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "comm/nccl.h"
#include "core/cuda/check.h"
#include "core/cuda/guard.h"
#include "core/cuda/module_loading.h"

namespace brigade::comm {

using namespace nccl_detail;

namespace {

std::atomic<int> communicators_created{0};

// Waits until a freshly initialised communicator is ready; aborts it and throws otherwise.
void settle(ncclComm_t comm, ncclResult_t result, const Deadline& deadline, const std::string& w) {
  if (comm == nullptr)  // nothing to poll, or to abort
    fail(w, ": ", result == ncclSuccess || result == ncclInProgress ? std::string("NCCL made no communicator")
                                                                    : nccl_error(nullptr, result));
  result = outcome(comm, result, deadline);
  if (result == ncclSuccess) return;
  std::string error = result == ncclInProgress ? "" : nccl_error(comm, result);
  ncclCommAbort(comm);  // not null: checked above
  if (result == ncclInProgress)
    throw TimeoutError(w + ": timed out after " + seconds_str(deadline.timeout()) + " (did every rank start?)");
  fail(w, ": ", error);
}

void check_devices(const std::vector<Device>& devices, const std::string& w) {
  for (Device d : devices) cuda::check_gpu(w.c_str(), d);
}

}  // namespace

bool nccl_available() { return true; }

int nccl_version() {
  int version = 0;
  BRIGADE_NCCL_CHECK(ncclGetVersion(&version));
  return version;
}

bool nccl_multi_rank_per_gpu() { return nccl_version() >= 23003; }

std::unique_ptr<Communicator> nccl_communicator(std::shared_ptr<Store> store, int rank, int size, Device device,
                                                Milliseconds timeout, std::optional<Milliseconds> connect_within) {
  std::string w =
      "comm nccl: creating rank " + std::to_string(rank) + " of " + std::to_string(size) + " on " + device.str();
  BRIGADE_CHECK(store != nullptr, w, ": a store is needed for the rendezvous");
  BRIGADE_CHECK(rank >= 0 && rank < size, w, ": the rank is outside the group");
  check_devices({device}, w);
  Deadline deadline = Deadline::after(connect_timeout(timeout, connect_within));
  // Every rank creates its communicators in the same order, so the n-th one agrees on its key.
  const std::string prefix = "nccl/" + std::to_string(communicators_created++);
  NcclComms comms{};
  cuda::DeviceGuard guard(device.index);
  try {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      const char* const names[kLanes] = {"/unique_id", "/down_id", "/header_id"};
      const std::string key = prefix + names[lane];
      ncclUniqueId id;
      if (rank == 0) {
        BRIGADE_NCCL_CHECK(ncclGetUniqueId(&id));
        store->set(key, std::string(reinterpret_cast<const char*>(&id), sizeof id));
      } else {
        std::string bytes = store->get(key, deadline);
        BRIGADE_CHECK(bytes.size() == sizeof id, w, ": the unique id in ", store->str(), " has ", bytes.size(),
                      " bytes, expected ", sizeof id);
        std::memcpy(&id, bytes.data(), sizeof id);
      }
      ncclConfig_t config = lane_config(lane);
      ncclComm_t comm = nullptr;
      // Two statements: `comm` must be read after the call has written it (argument order is unspecified).
      ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
      settle(comm, started, deadline, w + lane_suffix(lane));  // aborts it on failure
      comms[lane] = comm;
    }
  } catch (...) {
    abort_all(comms);  // the ones made before the one that failed
    throw;
  }
  return std::make_unique<NcclCommunicator>(comms, rank, size, device, timeout);
}

std::vector<std::unique_ptr<Communicator>> nccl_group(const std::vector<Device>& devices, Milliseconds timeout) {
  std::string w = "comm nccl_group of " + std::to_string(devices.size()) + " ranks";
  BRIGADE_CHECK(!devices.empty(), w, ": at least one rank is needed");
  check_devices(devices, w);
  bool shared = false;
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j) shared = shared || devices[i] == devices[j];
  if (shared) {
    int version = nccl_version();
    BRIGADE_CHECK(version >= 23003, w, ": several ranks on one GPU need NCCL >= 2.30.3, the loaded library is ",
                  version / 10000, ".", version / 100 % 100, ".", version % 100);
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 0);  // 0: a user's explicit setting wins
  }
  // Seen hanging on an H200 with three ranks on its one GPU; ranks on different GPUs of one process
  // wait for each other the same way, a device each (core/cuda/module_loading.h).
  BRIGADE_CHECK(devices.size() < 2 || cuda::module_loading() == cuda::ModuleLoading::eager, w,
                ": several NCCL ranks in one process need CUDA's eager module loading (CUDA_MODULE_LOADING=EAGER, set "
                "before CUDA starts; brigade's commands and GPU tests set it). With lazy loading, a rank's first launch "
                "of a kernel waits for its GPU to go idle while NCCL kernels there wait for that rank: a hang");
  // Creating the communicators is connecting, bounded like nccl_communicator's (never under 60 s),
  // not by the call timeout: a test that wants a hung receive aborted in 0.5 s must not also need
  // NCCL's initialisation of three communicators done in 0.5 s (on an H200 under load it was not).
  Deadline deadline = Deadline::after(connect_timeout(timeout));
  int n = int(devices.size());
  // Per rank, its communicators (NcclComms). Each lane is initialised as one group, so that
  // initialising rank 0 does not wait for rank 1 that this thread has not started yet.
  std::vector<NcclComms> comms(size_t(n), NcclComms{});
  auto abort_every = [&] {
    for (NcclComms& rank : comms) abort_all(rank);
  };
  try {
    for (size_t lane = 0; lane < kLanes; ++lane) {
      ncclUniqueId id;
      BRIGADE_NCCL_CHECK(ncclGetUniqueId(&id));
      ncclConfig_t config = lane_config(lane);
      std::vector<ncclResult_t> started(size_t(n), ncclSuccess);
      BRIGADE_NCCL_CHECK(ncclGroupStart());
      for (int r = 0; r < n; ++r) {
        cuda::DeviceGuard guard(devices[size_t(r)].index);
        started[size_t(r)] = ncclCommInitRankConfig(&comms[size_t(r)][lane], n, id, r, &config);
      }
      ncclResult_t ended = ncclGroupEnd();
      if (ended != ncclInProgress) BRIGADE_NCCL_CHECK(ended);
      for (int r = 0; r < n; ++r) {
        ncclComm_t comm = comms[size_t(r)][lane];
        comms[size_t(r)][lane] = nullptr;  // settle() aborts it on failure
        settle(comm, started[size_t(r)], deadline, w + ", rank " + std::to_string(r) + lane_suffix(lane));
        comms[size_t(r)][lane] = comm;
      }
    }
  } catch (...) {
    abort_every();
    throw;
  }
  std::vector<std::unique_ptr<Communicator>> result;
  try {
    for (int r = 0; r < n; ++r) {
      const NcclComms mine = comms[size_t(r)];
      comms[size_t(r)] = NcclComms{};  // the communicator owns them now
      result.push_back(std::make_unique<NcclCommunicator>(mine, r, n, devices[size_t(r)], timeout));
    }
  } catch (...) {
    abort_every();  // the ranks not yet handed over
    throw;
  }
  return result;
}

}  // namespace brigade::comm
