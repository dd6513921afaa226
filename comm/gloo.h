// The gloo backend: CPU tensors between processes, over TCP.
//
// Gloo (github.com/facebookincubator/gloo) connects every pair of ranks with a socket, using a Store
// to swap addresses, and moves "unbound buffers" — plain memory — with tagged sends and receives
// that complete asynchronously: exactly the post-then-wait shape exchange() needs. Its collectives
// (ring all-reduce, broadcast, barrier) take a timeout each.
//
// Messages map to gloo "slots" (a slot is an ordered stream per pair): one for a tag's headers, one
// for its data, in a range gloo's own collectives never use.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/store.h"

namespace brigade::comm {

bool gloo_available();  // false when brigade was built without libgloo

struct GlooOptions {
  // The address this rank's sockets listen on and advertise: "127.0.0.1" keeps a single-machine job
  // on loopback; across machines, this host's name or IP on the network the ranks share.
  std::string host = "127.0.0.1";
  std::string interface;  // alternatively a network interface name ("eth0"); wins over host
  Milliseconds timeout = default_timeout();     // each communication call
  std::optional<Milliseconds> connect_timeout;  // the rendezvous; unset: see comm/timeout.h
};

// Every rank of `size` calls it with the same store; returns once all are connected (or throws at
// the timeout, naming the ranks' store).
std::unique_ptr<Communicator> gloo_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                const GlooOptions& options = {});

}  // namespace brigade::comm
