// The nccl backend: GPU tensors between GPUs, in one process or many.
//
// NCCL moves data with GPU kernels, so a transfer is stream-ordered like any kernel: the calls here
// queue ncclSend/ncclRecv (inside ncclGroupStart/End, so a batch progresses together) on the
// communicator's own streams, fenced by events against the caller's current stream — before, so
// the data is ready; after, so later work sees the result. The host waits only for the headers that
// tell it what to allocate, and only after it has queued the exchange's sends (docs/comm.md: three
// NCCL communicators behind each of these, for headers and for data in each direction).
//
// Nothing hangs: communicators are created non-blocking (ncclCommInitRankConfig with blocking = 0)
// and polled against a deadline; a watchdog thread follows every queued transfer and, if one is
// still running at its deadline or NCCL reports an asynchronous error, aborts the communicator with
// ncclCommAbort — which also frees the GPU from a kernel waiting for a peer that never comes.
//
// The NCCL unique id that seeds a multi-process communicator travels through the rendezvous Store.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/store.h"

namespace brigade::comm {

bool nccl_available();  // built with NCCL (a GPU is still needed to use it)
int nccl_version();     // the loaded library's version code (2.28.9 -> 22809), 0 when not built
// Whether several ranks may share one GPU: NCCL >= 2.30.3, with NCCL_MULTI_RANK_GPU_ENABLE=1 (set
// by nccl_group when it needs it).
bool nccl_multi_rank_per_gpu();

// One rank of a group spread over processes (typically one GPU each): every rank calls it with the
// same store; rank 0 publishes the unique id there. `timeout` bounds each call; `connect_timeout`
// the wait for the unique id and NCCL's own initialisation.
std::unique_ptr<Communicator> nccl_communicator(std::shared_ptr<Store> store, int rank, int size, Device device,
                                                Milliseconds timeout = default_timeout(),
                                                std::optional<Milliseconds> connect_timeout = std::nullopt);
// A whole group in this process, rank r on devices[r]; drive each from its own thread. A device may
// repeat only when nccl_multi_rank_per_gpu() and CUDA loads modules eagerly (core/cuda/module_loading.h).
// `timeout` bounds each call; creating the communicators is bounded like connecting (timeout.h).
std::vector<std::unique_ptr<Communicator>> nccl_group(const std::vector<Device>& devices,
                                                      Milliseconds timeout = default_timeout());

}  // namespace brigade::comm
