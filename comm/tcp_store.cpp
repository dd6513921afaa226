// TcpStore: rank 0 serves the key-value table over TCP; every rank (rank 0 too) is a client.
//
// The protocol is a request and a reply per call, each a few length-prefixed fields:
//   set: 'S' key value  ->  0 (stored) or 1 (already set)
//   get: 'G' key        ->  0 (not set yet) or 1 value
// get() does not block in the server: the client asks again, backing off from 1 ms to 20 ms, until
// its own deadline. That keeps the server a single thread that never waits for anyone — one poll()
// over the listening socket and the clients.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "comm/socket.h"
#include "comm/store.h"

namespace brigade::comm {

namespace {

constexpr uint32_t kMaxField = 64u << 20;  // a key or value; the store holds addresses and ids, not data

// ---- byte plumbing shared by server and client ----

// Reads exactly n bytes; false on end of stream, error, or when `deadline` (if any) passes.
bool read_exact(int fd, void* data, size_t n, const Deadline* deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    if (deadline) {
      pollfd pfd{fd, POLLIN, 0};
      int ready = poll(&pfd, 1, int(deadline->remaining().count()));
      if (ready == 0 && deadline->passed()) return false;
      if (ready < 0 && errno != EINTR) return false;
      if (ready <= 0) continue;
    }
    ssize_t got = recv(fd, p, n, 0);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= size_t(got);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t sent = send(fd, p, n, MSG_NOSIGNAL);  // a vanished peer is an error, not SIGPIPE
    if (sent < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += sent;
    n -= size_t(sent);
  }
  return true;
}

void put_field(std::string& out, const std::string& field) {
  uint32_t n = htonl(uint32_t(field.size()));
  out.append(reinterpret_cast<const char*>(&n), 4);
  out += field;
}

bool read_field(int fd, std::string& field, const Deadline* deadline) {
  uint32_t n = 0;
  if (!read_exact(fd, &n, 4, deadline)) return false;
  n = ntohl(n);
  if (n > kMaxField) return false;
  field.resize(n);
  return read_exact(fd, field.data(), n, deadline);
}

// ---- the server: one thread, one poll() ----

class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port) {
    listen_fd_ = listen_on_any(port, 1024);
    BRIGADE_CHECK(listen_fd_ >= 0, "comm store: rank 0 cannot listen on port ", port, ": ", std::strerror(errno),
                  " (is MASTER_PORT taken by another job?)");
    if (pipe2(wake_, O_CLOEXEC) != 0) {
      close(listen_fd_);
      fail("comm store: pipe() failed: ", std::strerror(errno));
    }
    thread_ = std::thread([this] { serve(); });
  }

  ~TcpStoreServer() {
    char stop = 1;
    (void)!write(wake_[1], &stop, 1);
    thread_.join();
    for (int fd : clients_) close(fd);
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

 private:
  void serve() {
    for (;;) {
      std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      for (int fd : clients_) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients_.push_back(fd);
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        if (!handle(fds[i].fd)) {
          close(fds[i].fd);
          clients_.erase(std::find(clients_.begin(), clients_.end(), fds[i].fd));
        }
      }
    }
  }

  // One request from a readable client. A client sends each request whole, so reading it cannot
  // stall the server for long; a broken or silent one is dropped after a short bound.
  bool handle(int fd) {
    Deadline bound = Deadline::after(std::chrono::seconds(10));
    char op = 0;
    std::string key, value, reply;
    if (!read_exact(fd, &op, 1, &bound) || !read_field(fd, key, &bound)) return false;
    if (op == 'S') {
      if (!read_field(fd, value, &bound)) return false;
      reply.push_back(table_.emplace(key, value).second ? 0 : 1);
    } else if (op == 'G') {
      auto it = table_.find(key);
      reply.push_back(it == table_.end() ? 0 : 1);
      if (it != table_.end()) put_field(reply, it->second);
    } else {
      return false;
    }
    return write_all(fd, reply.data(), reply.size());
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::vector<int> clients_;
  std::map<std::string, std::string> table_;
  std::thread thread_;
};

// ---- the client ----

class TcpStore final : public Store {
 public:
  TcpStore(const std::string& host, int port, bool serve, const Deadline& deadline)
      : host_(host), port_(port), set_timeout_(deadline.timeout()) {
    if (serve) server_ = std::make_unique<TcpStoreServer>(port);
    // The server may not be up yet (rank 0 starts later than us): retry until the deadline.
    auto pause = std::chrono::milliseconds(10);
    while ((fd_ = connect_within(serve ? "127.0.0.1" : host, port, deadline.remaining())) < 0) {
      if (deadline.passed())
        throw TimeoutError("comm store: timed out after " + seconds_str(deadline.timeout()) + " connecting to " +
                           str() + " (is rank 0 running, and MASTER_ADDR its address?)");
      std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }

  ~TcpStore() override {
    if (fd_ >= 0) close(fd_);
  }

  void set(const std::string& key, const std::string& value) override {
    std::string request = "S";
    put_field(request, key);
    put_field(request, value);
    std::lock_guard<std::mutex> lock(mutex_);
    char status = 0;
    Deadline deadline = Deadline::after(set_timeout_);
    BRIGADE_CHECK(write_all(fd_, request.data(), request.size()) && read_exact(fd_, &status, 1, &deadline),
                  "comm store: lost the connection to ", str(), " while setting key '", key,
                  "' (no answer within ", seconds_str(set_timeout_), ", or rank 0 exited)");
    BRIGADE_CHECK(status == 0, "comm store: key '", key, "' is already set in ", str());
  }

  std::string get(const std::string& key, const Deadline& deadline) override {
    std::string request = "G";
    put_field(request, key);
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        char found = 0;
        std::string value;
        BRIGADE_CHECK(write_all(fd_, request.data(), request.size()) && read_exact(fd_, &found, 1, &deadline) &&
                          (!found || read_field(fd_, value, &deadline)),
                      "comm store: lost the connection to ", str(), " while waiting for key '", key,
                      "' (did rank 0 exit, or its host become unreachable?)");
        if (found) return value;
      }
      if (deadline.passed())
        throw TimeoutError("comm store: timed out after " + seconds_str(deadline.timeout()) + " waiting for key '" +
                           key + "' in " + str() + " (did every rank start?)");
      std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }

  std::string str() const override { return "TCP store " + host_ + ":" + std::to_string(port_); }

 private:
  std::string host_;
  int port_;
  Milliseconds set_timeout_;  // how long a set() may wait for the server's answer: the connect budget
  std::unique_ptr<TcpStoreServer> server_;  // rank 0 only
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Store> make_tcp_store(const std::string& host, int port, bool serve, const Deadline& deadline) {
  BRIGADE_CHECK(port > 0 && port <= 65535, "comm store: port ", port, " is not a TCP port");
  return std::make_unique<TcpStore>(host, port, serve, deadline);
}

}  // namespace brigade::comm
