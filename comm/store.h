// Store: the rendezvous — a tiny key-value table every rank of a job can reach before any
// communicator exists. Ranks publish what the others need to connect (gloo's socket addresses, the
// NCCL unique id) under agreed keys, and wait for each other's keys.
//
// Keys are written once. get() waits until another rank has set the key, up to a deadline: a rank
// that never comes shows up as a TimeoutError naming the key, not a hang.
//
// Two implementations:
//   FileStore  a directory every rank can see (a temp dir on one machine, a shared file system
//              across nodes). `brigade launch` makes a fresh one per run.
//   TcpStore   rank 0 serves the table on MASTER_ADDR:MASTER_PORT; the others connect to it.
// (gloo ships a FileStore too, but its get() waits a fixed 30 s whatever the communicator's timeout,
// and it has no TCP store in the Debian version; one small store serves gloo and nccl alike.)
#pragma once

#include <memory>
#include <string>

#include "comm/launch_env.h"
#include "comm/timeout.h"

namespace brigade::comm {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Throws TimeoutError naming the key when it is not set by the deadline.
  virtual std::string get(const std::string& key, const Deadline& deadline) = 0;
  virtual std::string str() const = 0;  // "file store /tmp/x", for messages
};

std::unique_ptr<Store> make_file_store(const std::string& directory);
// Rank 0 (`serve`) listens on `port` (all interfaces) and also reads its own table through a
// connection like everyone else; other ranks connect to host:port, retrying until the deadline.
std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve, const Deadline& deadline);
// A table in this process's memory: for a world of one, and for tests.
std::unique_ptr<Store> make_memory_store();

// The store `env` describes: BRIGADE_COMM_STORE, else MASTER_ADDR/MASTER_PORT, else (a world of one)
// a memory store. Throws explaining what to set when a multi-process job has neither.
std::unique_ptr<Store> open_store(const LaunchEnv& env, const Deadline& deadline);

}  // namespace brigade::comm
