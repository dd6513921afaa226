#include "comm/local_world.h"

#include "comm/communicator.h"
#include "core/error.h"

namespace brigade::comm {

void LocalWorld::throw_if_aborted() const {
  if (aborted_) throw AbortedError("aborted by another rank: " + abort_reason_);
}

uint64_t LocalWorld::post(const Address& address, Letter letter) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_aborted();
  Mailbox& box = mailboxes_[address];
  box.letters.push_back(std::move(letter));
  box.changed.notify_all();
  return box.posted++;
}

std::optional<LocalWorld::Letter> LocalWorld::take(const Address& address, const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  Mailbox& box = mailboxes_[address];  // std::map nodes stay put while others are inserted
  bool ready = box.changed.wait_until(lock, deadline.at(), [&] { return aborted_ || !box.letters.empty(); });
  throw_if_aborted();
  if (!ready) return std::nullopt;
  Letter letter = std::move(box.letters.front());
  box.letters.pop_front();
  ++box.taken;
  box.changed.notify_all();  // a rendezvous sender may be waiting for this
  return letter;
}

bool LocalWorld::wait_taken(const Address& address, uint64_t ticket, const Deadline& deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  Mailbox& box = mailboxes_[address];
  bool taken = box.changed.wait_until(lock, deadline.at(), [&] { return aborted_ || box.taken > ticket; });
  throw_if_aborted();
  return taken;
}

std::optional<Parcel> LocalWorld::meet(const std::string& group, uint64_t sequence, int member, int size,
                                       Parcel contribution, const Combine& combine, const Deadline& deadline,
                                       std::vector<int>* missing) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_aborted();
  auto key = std::make_pair(group, sequence);
  Meeting& m = meetings_[key];
  if (m.arrived.empty()) {
    m.contributions.resize(size_t(size));
    m.arrived.assign(size_t(size), false);
  }
  m.contributions[size_t(member)] = std::move(contribution);
  m.arrived[size_t(member)] = true;
  if (++m.arrivals == size) {
    // Last to arrive: combine without holding the lock (it may run kernels), then publish.
    lock.unlock();
    Parcel result;
    std::exception_ptr error;
    try {
      result = combine(m.contributions);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    m.result = std::move(result);
    m.error = error;
    m.done = true;
    m.changed.notify_all();
  } else {
    bool done = m.changed.wait_until(lock, deadline.at(), [&] { return aborted_ || m.done; });
    throw_if_aborted();
    if (!done) {
      for (int r = 0; r < size; ++r)
        if (!m.arrived[size_t(r)]) missing->push_back(r);
      return std::nullopt;
    }
  }
  Parcel result = m.result;
  std::exception_ptr error = m.error;
  if (++m.departures == size) meetings_.erase(key);
  if (error) std::rethrow_exception(error);
  return result;
}

void LocalWorld::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return;
  aborted_ = true;
  abort_reason_ = reason;
  for (auto& [address, box] : mailboxes_) box.changed.notify_all();
  for (auto& [key, meeting] : meetings_) meeting.changed.notify_all();
}

}  // namespace brigade::comm
