// core/cuda_graph.h in a build without CUDA: nothing can be captured, so capture() throws.
#include "core/cuda_graph.h"

#include "core/error.h"

namespace brigade {

struct CudaGraph::Impl {};

CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;
CudaGraph::CudaGraph(CudaGraph&&) noexcept = default;
CudaGraph& CudaGraph::operator=(CudaGraph&&) noexcept = default;

void CudaGraph::capture(Device, const std::function<void()>&) {
  fail("CudaGraph::capture: CUDA is not available in this build (brigade was configured without CUDA)");
}
void CudaGraph::replay() const { fail("CudaGraph::replay: nothing was captured"); }
Device CudaGraph::device() const { fail("CudaGraph::device: nothing was captured"); }
size_t CudaGraph::operations() const { return 0; }
size_t CudaGraph::pool_bytes() const { return 0; }
bool is_capturing(Device) { return false; }

}  // namespace brigade
