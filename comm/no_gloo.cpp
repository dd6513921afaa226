// Built without libgloo: the backend exists in the API and explains its absence.
#include "comm/gloo.h"

namespace brigade::comm {

bool gloo_available() { return false; }

std::unique_ptr<Communicator> gloo_communicator(std::shared_ptr<Store>, int, int, const GlooOptions&) {
  fail("comm: the gloo backend is not available in this build (install libgloo-dev and reconfigure with "
       "-Dgloo=enabled)");
}

}  // namespace brigade::comm
