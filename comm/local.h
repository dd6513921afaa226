// Local communicators: the ranks are threads of this process.
//
//   auto comms = comm::local_group(4);            // one communicator per rank
//   std::vector<std::thread> threads;
//   for (int r = 0; r < 4; ++r)
//     threads.emplace_back([&, r] { run_stage(*comms[r]); });
//
// Tensors are handed over, not serialised: a receiver gets the sender's tensor itself (on a GPU,
// with its stream ordered after the sender's by an event; see comm/parcel.h). So a sender must not
// modify a tensor in place after sending it — clone() first if it must. Receiving into an existing
// tensor (recv_into) copies. Everything else — the handshake checks, timeouts, aborts — behaves as
// with the other backends, so code that passes here passes across processes. (One difference: the
// groups split from one local_group share fate — an abort in any of them ends them all.)
//
// Sends are queued by default: an exchange posts its sends and returns once its receives are in.
// LocalSends::rendezvous makes an exchange also wait until the peers have taken every letter it
// posted — the strictest behaviour of gloo or NCCL — so a test on threads catches an order of
// exchanges that would hang across processes.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace brigade::comm {

enum class LocalSends { queued, rendezvous };

// `size` ranks on `device`.
std::vector<std::unique_ptr<Communicator>> local_group(int size, Device device = Device::cpu(),
                                                       Milliseconds timeout = default_timeout(),
                                                       LocalSends sends = LocalSends::queued);
// One rank per entry of `devices` (several ranks may share a device).
std::vector<std::unique_ptr<Communicator>> local_group(const std::vector<Device>& devices,
                                                       Milliseconds timeout = default_timeout(),
                                                       LocalSends sends = LocalSends::queued);

}  // namespace brigade::comm
