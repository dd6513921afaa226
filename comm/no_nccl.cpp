// Built without NCCL: the backend exists in the API and explains its absence.
#include "comm/nccl.h"

namespace brigade::comm {

namespace {

[[noreturn]] void unavailable() {
  fail("comm: the nccl backend is not available in this build (it needs CUDA and NCCL at configure time)");
}

}  // namespace

bool nccl_available() { return false; }
int nccl_version() { return 0; }
bool nccl_multi_rank_per_gpu() { return false; }

std::unique_ptr<Communicator> nccl_communicator(std::shared_ptr<Store>, int, int, Device, Milliseconds,
                                                std::optional<Milliseconds>) {
  unavailable();
}

std::vector<std::unique_ptr<Communicator>> nccl_group(const std::vector<Device>&, Milliseconds) { unavailable(); }

}  // namespace brigade::comm
