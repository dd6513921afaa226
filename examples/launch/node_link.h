// The connection between the launchers of a multi-machine job.
//
// Node 0's launcher listens on --master-port; every other node's launcher connects to it and says
// hello. Over these links node 0 tells everyone when to start (and where the ranks' store is), when
// to stop, and how the job ended; the others tell node 0 when one of their ranks failed and when
// their ranks are all gone. Messages are text lines ("start 0 41234").
//
// Each side writes a heartbeat line every second and reads everything the other side writes; a
// link that stays silent for its silence limit counts as lost — which is how a launcher notices a
// machine that died or a network link that went down, where TCP itself may wait many minutes.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace brigade::launch {

using Milliseconds = std::chrono::milliseconds;

class NodeLink {
 public:
  NodeLink(int fd, std::string peer, Milliseconds silence);  // takes the connected socket
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  void send(const std::string& line);  // without the newline; a failed write marks the link lost
  // Reads what has arrived without waiting, sends a heartbeat when one is due, and returns the
  // complete lines (heartbeats left out). Marks the link lost on end of stream, error or silence.
  std::vector<std::string> receive();

  bool lost() const { return !why_lost_.empty(); }
  const std::string& why_lost() const { return why_lost_; }  // "closed by the peer", ...
  const std::string& peer() const { return peer_; }

 private:
  void lose(const std::string& why);

  int fd_;
  std::string peer_;
  Milliseconds silence_;
  std::string partial_;
  std::string why_lost_;
  std::chrono::steady_clock::time_point last_heard_, last_sent_;
};

// Node 0: a socket listening on every interface; throws std::runtime_error naming the port.
int listen_for_nodes(int port);
// The next node waiting to connect, or null when none is (never blocks).
std::unique_ptr<NodeLink> accept_node(int listen_fd, Milliseconds silence);
// Every other node: connects to node 0, retrying until `within` has passed (node 0's launcher may
// start later); throws std::runtime_error saying where it tried.
std::unique_ptr<NodeLink> connect_to_node0(const std::string& host, int port, Milliseconds within,
                                           Milliseconds silence);

}  // namespace brigade::launch
