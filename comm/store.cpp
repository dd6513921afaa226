#include "comm/store.h"

#include <condition_variable>
#include <map>
#include <mutex>

#include "comm/communicator.h"

namespace brigade::comm {

namespace {

class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    BRIGADE_CHECK(table_.emplace(key, value).second, "comm store: key '", key, "' is already set");
    changed_.notify_all();
  }

  std::string get(const std::string& key, const Deadline& deadline) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_until(lock, deadline.at(), [&] { return table_.count(key) > 0; }))
      throw TimeoutError("comm store: timed out after " + seconds_str(deadline.timeout()) + " waiting for key '" +
                         key + "' in a memory store");
    return table_.at(key);
  }

  std::string str() const override { return "memory store"; }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> table_;
};

}  // namespace

std::unique_ptr<Store> make_memory_store() { return std::make_unique<MemoryStore>(); }

std::unique_ptr<Store> open_store(const LaunchEnv& env, const Deadline& deadline) {
  if (!env.store_dir.empty()) return make_file_store(env.store_dir);
  if (!env.master_addr.empty()) return make_tcp_store(env.master_addr, env.master_port, env.rank == 0, deadline);
  BRIGADE_CHECK(env.world_size == 1, "comm: ", env.str(),
                " has no rendezvous: set BRIGADE_COMM_STORE to a directory every rank can see, or MASTER_ADDR and "
                "MASTER_PORT to where rank 0 can listen (brigade launch sets them)");
  return make_memory_store();
}

}  // namespace brigade::comm
