// The connection between the launchers of a multi-machine job.
//
// Node 0's launcher listens on --master-port; every other node's launcher connects to it and says
// hello. Over these links node 0 tells everyone when to start (and where the ranks' store is), when
// to stop, and how the job ended; the others tell node 0 when one of their ranks failed and when
// their ranks are all gone. Messages are text lines ("start 0 41234").
//
// A thread of the link writes a heartbeat line every second, whatever the launcher's main loop is
// doing (a launcher blocked writing its ranks' output to a paused terminal is slow, not dead); the
// main loop reads. A link that stays silent for its silence limit counts as lost — which is how a
// launcher notices a machine that died or a network link that went down, where TCP itself may wait
// many minutes. Lines are queued whole and written in order, however the socket takes them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace brigade::launch {

using Milliseconds = std::chrono::milliseconds;

// The heartbeat interval; --node-timeout must leave room for a couple of them.
constexpr Milliseconds kHeartbeat{1000};

class NodeLink {
 public:
  NodeLink(int fd, std::string peer, Milliseconds silence);  // takes the connected socket
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  void send(const std::string& line);  // without the newline; queued, written in order
  // Moves what it can both ways without waiting, then returns the oldest unread line (heartbeats
  // left out), or nothing. Marks the link lost on end of stream, an error, or silence.
  std::optional<std::string> next_line();

  bool lost() const;
  std::string why_lost() const;  // "the connection was closed", "nothing heard for 30 s ..."
  const std::string& peer() const { return peer_; }

 private:
  void flush_locked();  // writes what the socket takes of the queue; needs mutex_
  void lose_locked(const std::string& why);
  void beat();          // the heartbeat thread

  const int fd_;
  const std::string peer_;
  const Milliseconds silence_;
  mutable std::mutex mutex_;  // the socket's writes, the queue, why_lost_
  std::string outgoing_;
  std::string why_lost_;
  bool closing_ = false;
  std::condition_variable closing_cv_;
  std::string partial_;              // main loop only: an unfinished incoming line
  std::deque<std::string> incoming_;  // main loop only
  std::chrono::steady_clock::time_point last_heard_;
  std::thread heartbeat_;
};

// Node 0: a socket listening on every interface; throws std::runtime_error naming the port.
int listen_for_nodes(int port);
// The next node waiting to connect, or null when none is (never blocks).
std::unique_ptr<NodeLink> accept_node(int listen_fd, Milliseconds silence);
// Every other node: connects to node 0, retrying until `within` has passed (node 0's launcher may
// start later) or `give_up()` says so; throws std::runtime_error saying where it tried.
std::unique_ptr<NodeLink> connect_to_node0(const std::string& host, int port, Milliseconds within,
                                           Milliseconds silence, const std::function<bool()>& give_up);

}  // namespace brigade::launch
