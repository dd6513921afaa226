// LocalWorld: what the ranks of a local group (threads of one process) share — mailboxes for
// point-to-point messages and meeting points for collectives.
//
// A mailbox per (group, sender, receiver, tag) holds parcels in the order they were posted. Posting
// never blocks (the queue grows), so a thread can post all its sends of a batch and then wait for its
// receives: no two threads can wait on each other. Waiting uses a condition variable with a deadline.
//
// A meeting is one collective call: each member drops off its contribution; the last to arrive
// combines them (outside the lock) and everyone picks up the same result.
//
// abort() wakes every waiter of every group with the reason, so one thread's failure ends the whole
// world promptly instead of leaving the others to time out one by one.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "comm/handshake.h"
#include "comm/parcel.h"
#include "comm/timeout.h"

namespace brigade::comm {

class LocalWorld {
 public:
  struct Letter {
    Parcel parcel;
    Shapes shapes;  // the sender's channel kind, checked like a header's
  };
  struct Address {
    std::string group;
    int from, to, tag;
    auto operator<=>(const Address&) const = default;
  };

  // Returns the letter's ticket: its number among the letters ever posted at `address`.
  uint64_t post(const Address& address, Letter letter);
  // The oldest letter at `address`; nullopt when the deadline passes first. Throws when aborted.
  std::optional<Letter> take(const Address& address, const Deadline& deadline);
  // Waits until the letter with `ticket` has been taken; false when the deadline passes first.
  // Throws when aborted.
  bool wait_taken(const Address& address, uint64_t ticket, const Deadline& deadline);

  using Combine = std::function<Parcel(std::vector<Parcel>& contributions)>;
  // Collective number `sequence` of `group` (every member numbers its collectives the same way).
  // Returns the combined parcel, or nullopt at the deadline with the members that never came in
  // `missing`. Rethrows in every member what `combine` threw. Throws when aborted.
  std::optional<Parcel> meet(const std::string& group, uint64_t sequence, int member, int size, Parcel contribution,
                             const Combine& combine, const Deadline& deadline, std::vector<int>* missing);

  void abort(const std::string& reason);

 private:
  struct Mailbox {
    std::deque<Letter> letters;
    uint64_t posted = 0, taken = 0;  // letters ever posted and taken (letters are taken in order)
    std::condition_variable changed;
  };
  struct Meeting {
    std::vector<Parcel> contributions;
    std::vector<bool> arrived;
    int arrivals = 0, departures = 0;
    bool done = false;
    Parcel result;
    std::exception_ptr error;
    std::condition_variable changed;
  };
  void throw_if_aborted() const;  // with mutex_ held

  std::mutex mutex_;
  std::map<Address, Mailbox> mailboxes_;
  std::map<std::pair<std::string, uint64_t>, Meeting> meetings_;
  bool aborted_ = false;
  std::string abort_reason_;
};

}  // namespace brigade::comm
