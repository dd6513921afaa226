// FileStore: one file per key in a shared directory.
//
// A key's file appears atomically: the value is written to a temporary name, then renamed — so a
// reader never sees half a value, on local disks and on NFS alike. Readers poll (inotify does not
// work across NFS clients), backing off from 1 ms to 20 ms.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "comm/communicator.h"
#include "comm/store.h"

namespace brigade::comm {

namespace {

// Keys may hold '/' and other characters a file name cannot: keep [A-Za-z0-9._-], escape the rest.
std::string file_name(const std::string& key) {
  static const char* hex = "0123456789abcdef";
  std::string name = "key.";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      name += char(c);
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  return name;
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string directory) : directory_(std::move(directory)) {
    BRIGADE_CHECK(access(directory_.c_str(), W_OK | X_OK) == 0, "comm store: the directory '", directory_,
                  "' (BRIGADE_COMM_STORE) is not a writable directory: ", std::strerror(errno));
  }

  void set(const std::string& key, const std::string& value) override {
    std::string path = directory_ + "/" + file_name(key);
    std::string tmp = directory_ + "/.tmp." + std::to_string(getpid()) + "." + std::to_string(counter_++) + "." +
                      file_name(key);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), std::streamsize(value.size()));
      out.close();
      BRIGADE_CHECK(out.good(), "comm store: cannot write '", tmp, "': ", std::strerror(errno));
    }
    // link() fails if the key exists (rename would silently replace it): a key is written once.
    if (link(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      BRIGADE_CHECK(err != EEXIST, "comm store: key '", key, "' is already set in ", directory_,
                    " (reusing a store directory from another run? give each run a fresh one)");
      fail("comm store: cannot create '", path, "': ", std::strerror(err));
    }
    unlink(tmp.c_str());
  }

  std::string get(const std::string& key, const Deadline& deadline) override {
    std::string path = directory_ + "/" + file_name(key);
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in) {
        std::ostringstream value;
        value << in.rdbuf();
        return value.str();
      }
      if (deadline.passed())
        throw TimeoutError("comm store: timed out after " + seconds_str(deadline.timeout()) + " waiting for key '" +
                           key + "' in " + directory_ + " (did every rank start, with the same BRIGADE_COMM_STORE?)");
      std::this_thread::sleep_for(std::min(pause, deadline.remaining()));
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  }

  std::string str() const override { return "file store " + directory_; }

 private:
  std::string directory_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& directory) { return std::make_unique<FileStore>(directory); }

}  // namespace brigade::comm
