// The emulated NCCL's transport: how messages move between ranks, and the rendezvous directory.
//
// Like NCCL's unique id, which carries the address of its bootstrap root, the emulator's id carries
// the path of a fresh directory under $TMPDIR. Every rank publishes itself there ("member.<rank>",
// holding its process id), and once all have, each knows which ranks share its process:
//   - between ranks of one process a message stays in memory (World::mail), so the deadlock check
//     sees every change;
//   - to or from another process it is a file "<key>" in the directory, written to a temporary name
//     and renamed, so a reader never sees half of it. The one reader unlinks it after reading.
// A rank that aborts leaves "aborted.<rank>" for its peers; one that leaves (destroy or abort)
// leaves "gone.<rank>", and the last to go removes the directory.
//
// Not modelled: ranks on other machines (the emulator is CPU-only: one machine, one file system),
// bandwidth, and a process that dies without leaving (its peers wait until they are aborted).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "emulator/nccl_internal.h"

namespace brigade::emu::nccl {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<World>> worlds;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: stream workers may still use worlds at exit
  return *r;
}

std::string file(const World& world, const std::string& name) { return world.path + "/" + name; }

// Writes `parts` to `path` through a temporary name and a rename: readers see all of it or nothing.
bool write_whole(const std::string& path, const std::vector<std::pair<const void*, size_t>>& parts) {
  static std::atomic<uint64_t> serial{0};
  const std::string temporary = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return false;
  bool ok = true;
  for (const auto& [data, bytes] : parts) {
    const char* at = static_cast<const char*>(data);
    for (size_t left = bytes; ok && left > 0;) {
      const ssize_t n = ::write(fd, at, left);
      if (n <= 0) ok = false;
      else at += n, left -= size_t(n);
    }
  }
  ok = ::close(fd) == 0 && ok;
  if (ok) ok = std::rename(temporary.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(temporary.c_str());
  return ok;
}

// The whole file, or false when it is not there.
bool read_whole(const std::string& path, std::vector<char>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  out->clear();
  char chunk[1 << 16];
  for (ssize_t n; (n = ::read(fd, chunk, sizeof chunk)) > 0;) out->insert(out->end(), chunk, chunk + n);
  ::close(fd);
  return true;
}

bool exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

std::string temp_root() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

}  // namespace

std::string World::short_name() const { return std::filesystem::path(path).filename().string(); }

std::string Rank::name() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " (" + world->short_name() + ")";
}

std::string new_rendezvous_path() {
  static std::atomic<uint64_t> counter{0};
  std::random_device random;
  char name[96];
  std::snprintf(name, sizeof name, "/brigade-nccl-%d-%llu-%08x", int(getpid()),
                static_cast<unsigned long long>(counter++), unsigned(random()));
  return temp_root() + name;
}

std::shared_ptr<World> find_world(const std::string& path, int nranks) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::shared_ptr<World> world = r.worlds[path].lock();
  if (world) return world->nranks == nranks ? world : nullptr;
  world = std::make_shared<World>();
  world->path = path;
  world->nranks = nranks;
  world->members.assign(size_t(nranks), nullptr);
  world->local.assign(size_t(nranks), 0);
  world->peer_aborted.assign(size_t(nranks), 0);
  r.worlds[path] = world;
  return world;
}

std::string publish_member(World& world, int rank, int device) {
  if (::mkdir(world.path.c_str(), 0700) != 0 && errno != EEXIST)
    return "cannot create the rendezvous directory " + world.path + ": " + std::strerror(errno);
  const std::string member = file(world, "member." + std::to_string(rank));
  if (exists(member)) return "rank " + std::to_string(rank) + " of " + world.short_name() + " joined twice";
  const std::string who = std::to_string(getpid()) + " " + std::to_string(device);  // "<pid> <device>"
  if (!write_whole(member, {{who.data(), who.size()}}))
    return "cannot write " + member + ": " + std::strerror(errno);
  return "";
}

std::vector<int> locate_members(World& world) {
  std::vector<int> missing;
  std::vector<char> local(size_t(world.nranks), 0);
  std::vector<int> devices(size_t(world.nranks), -1);
  std::vector<char> bytes;
  for (int r = 0; r < world.nranks; ++r) {
    if (!read_whole(file(world, "member." + std::to_string(r)), &bytes)) {
      missing.push_back(r);
      continue;
    }
    const std::string who(bytes.begin(), bytes.end());
    int pid = 0, device = -1;
    std::sscanf(who.c_str(), "%d %d", &pid, &device);
    local[size_t(r)] = pid == int(getpid());
    devices[size_t(r)] = device;
  }
  if (!missing.empty()) return missing;
  std::lock_guard<std::mutex> lock(world.mutex);
  if (!world.located) {
    world.local = local;
    world.devices = devices;
    world.all_local = std::all_of(local.begin(), local.end(), [](char c) { return c != 0; });
    world.located = true;
    world.bump();
  }
  return missing;
}

void post(World& world, int from, int to, const std::string& key, Message message) {
  (void)from;
  if (world.local[size_t(to)]) {
    std::lock_guard<std::mutex> lock(world.mutex);
    world.mail[key] = std::move(message);
    world.bump();
    return;
  }
  // A failed write (a full disk) leaves the receiver waiting; say why, since nothing else will.
  if (!write_whole(file(world, key), {{&message.envelope, sizeof(Envelope)},
                                      {message.data.data(), message.data.size()}}))
    std::fprintf(stderr, "brigade emulated NCCL: cannot write %s: %s\n", file(world, key).c_str(),
                 std::strerror(errno));
}

bool fetch(World& world, int from, int to, const std::string& key, Message* message) {
  (void)to;
  if (world.local[size_t(from)]) {
    std::lock_guard<std::mutex> lock(world.mutex);
    auto it = world.mail.find(key);
    if (it == world.mail.end()) return false;
    *message = std::move(it->second);
    world.mail.erase(it);
    return true;
  }
  std::vector<char> bytes;
  const std::string path = file(world, key);
  if (!read_whole(path, &bytes) || bytes.size() < sizeof(Envelope)) return false;
  ::unlink(path.c_str());
  std::memcpy(&message->envelope, bytes.data(), sizeof(Envelope));
  message->data.assign(bytes.begin() + sizeof(Envelope), bytes.end());
  return true;
}

void publish_abort(World& world, int rank) {
  const std::string mark = "aborted";
  write_whole(file(world, "aborted." + std::to_string(rank)), {{mark.data(), mark.size()}});
}

bool remote_aborted(World& world, int rank) { return exists(file(world, "aborted." + std::to_string(rank))); }

void leave(World& world, int rank) {
  if (!exists(world.path)) return;  // never published (init failed early), or already removed
  const std::string mark = "gone";
  write_whole(file(world, "gone." + std::to_string(rank)), {{mark.data(), mark.size()}});
  for (int r = 0; r < world.nranks; ++r)
    if (!exists(file(world, "gone." + std::to_string(r)))) return;
  std::error_code ignored;  // two ranks leaving at once may both get here
  std::filesystem::remove_all(world.path, ignored);
}

double bootstrap_timeout_seconds() {
  static const double seconds = [] {
    const char* env = std::getenv("BRIGADE_EMULATED_NCCL_TIMEOUT");
    return env ? std::atof(env) : 300.0;
  }();
  return seconds;
}

}  // namespace brigade::emu::nccl
