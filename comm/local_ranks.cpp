#include "comm/local_ranks.h"

#include <atomic>
#include <thread>
#include <typeinfo>

#include "core/stream.h"

namespace brigade::comm {

namespace {

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return *e.what() ? e.what() : "(empty message)";
  } catch (...) {
    return "(an exception that is not a std::exception)";
  }
}

// Rethrows `error` with `prefix` in front of its message where its type allows it: brigade's own
// types, exactly (a subclass would lose what it adds), are made again; anything else goes as it is.
[[noreturn]] void rethrow_naming(const std::exception_ptr& error, const std::string& prefix) {
  try {
    std::rethrow_exception(error);
  } catch (const TimeoutError& e) {
    if (typeid(e) == typeid(TimeoutError)) throw TimeoutError(prefix + e.what());
    throw;
  } catch (const AbortedError& e) {
    if (typeid(e) == typeid(AbortedError)) throw AbortedError(prefix + e.what());
    throw;
  } catch (const Error& e) {
    if (typeid(e) == typeid(Error)) throw Error(prefix + e.what());
    throw;
  }
}

}  // namespace

std::string RankOutcomes::message(int rank) const {
  const Outcome& o = at(rank);
  return o.error ? message_of(o.error) : std::string();
}

int RankOutcomes::root_cause() const {
  int first = -1, first_own = -1;
  for (int r = 0; r < size(); ++r) {
    const Outcome& o = at(r);
    if (!o.error) continue;
    if (first < 0 || o.order < at(first).order) first = r;
    if (!o.aborted && (first_own < 0 || o.order < at(first_own).order)) first_own = r;
  }
  return first_own >= 0 ? first_own : first;
}

void RankOutcomes::rethrow() const {
  const int r = root_cause();
  if (r < 0) return;
  rethrow_naming(at(r).error, "rank " + std::to_string(r) + " of " + std::to_string(size()) + ": ");
}

RankOutcomes run_rank_threads(const std::vector<std::unique_ptr<Communicator>>& world,
                              const std::function<void(int rank)>& body, RankThreadOptions options) {
  const int n = int(world.size());
  std::vector<RankOutcomes::Outcome> outcomes(world.size());
  std::atomic<int> failures{0};
  auto run_rank = [&](int r) {
    try {
      Stream stream;
      std::optional<StreamGuard> on_stream;
      const Device device = world[size_t(r)]->device();
      if (options.own_streams && device.is_cuda()) {
        stream = Stream::create(device);
        on_stream.emplace(stream);
      }
      body(r);
      if (stream.defined()) stream.synchronize();  // the rank's work is done when the runner returns
    } catch (...) {
      RankOutcomes::Outcome& mine = outcomes[size_t(r)];
      mine.error = std::current_exception();
      mine.order = failures++;
      try {
        std::rethrow_exception(mine.error);
      } catch (const AbortedError&) {
        mine.aborted = true;
      } catch (...) {
      }
      if (!options.abort_peers) return;
      const std::string reason = "rank " + std::to_string(r) + " of " + std::to_string(n) +
                                 " failed: " + message_of(mine.error);
      for (const auto& comm : world) comm->abort(reason);  // safe from any thread; a no-op when done already
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(world.size());
  for (int r = 0; r < n; ++r) threads.emplace_back(run_rank, r);
  for (std::thread& t : threads) t.join();
  return RankOutcomes(std::move(outcomes));
}

}  // namespace brigade::comm
