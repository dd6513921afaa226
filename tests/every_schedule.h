// Walking every schedule the generators build over a range of (P, M, V), for the tests that hold
// each one to a property (runs every piece of work once, is safe under rendezvous, ...).
#pragma once

#include <catch2/catch.hpp>

#include <functional>

#include "core/error.h"
#include "pipeline/schedule.h"

namespace test {

// The configuration make_schedule was asked for.
struct ScheduleCase {
  brigade::pipeline::ScheduleKind kind;
  int P, M, V;
};

// Calls `check(schedule, c)` for every schedule make_schedule builds: every kind, P in [min_P, max_P],
// M in [1, max_M], V in [1, max_V], with an INFO naming the case. A configuration it refuses goes to
// `refused` with the error when one is given, and is skipped otherwise. Returns how many it built.
inline int for_each_schedule(int min_P, int max_P, int max_M, int max_V,
                             const std::function<void(const brigade::pipeline::Schedule&, const ScheduleCase&)>& check,
                             const std::function<void(const ScheduleCase&, const brigade::Error&)>& refused = nullptr) {
  using namespace brigade::pipeline;
  int built = 0;
  for (ScheduleKind kind : all_schedule_kinds()) {
    for (int P = min_P; P <= max_P; ++P) {
      for (int M = 1; M <= max_M; ++M) {
        for (int V = 1; V <= max_V; ++V) {
          const ScheduleCase c{kind, P, M, V};
          Schedule s;
          try {
            s = make_schedule(kind, P, M, V);
          } catch (const brigade::Error& e) {
            if (refused) refused(c, e);
            continue;
          }
          ++built;
          INFO(schedule_name(kind) << " P=" << P << " M=" << M << " V=" << V);
          check(s, c);
        }
      }
    }
  }
  return built;
}

}  // namespace test
