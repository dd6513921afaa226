// The emulated NCCL's errors: result strings, the last error's text, and asynchronous errors.
//
// Written from the NCCL User Guide: ncclGetErrorString, ncclGetLastError and ncclCommGetAsyncError
// ("Communicator Creation and Management Functions"), and "Error handling and communicator abort"
// ("Asynchronous errors and error handling"): an error found while work runs on a stream is kept by
// its communicator and reported by ncclCommGetAsyncError, which is also how a non-blocking
// communicator says an init, split or finalize is still in progress.
//
// ncclGetLastError's text is the process's last error, or, given a communicator that has an
// asynchronous error, that error's text (so the text matches the code ncclCommGetAsyncError gave).
#include <set>

#include "emulator/nccl_internal.h"

using namespace brigade::emu::nccl;

namespace brigade::emu::nccl {
namespace {

std::mutex last_mutex;
std::string& last_text() {
  static std::string* text = new std::string;  // never destroyed: workers may still fail at exit
  return *text;
}

// Texts live for the whole process, so a pointer from ncclGetLastError stays valid.
const char* keep(const std::string& text) {
  static std::mutex mutex;
  static auto* kept = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(mutex);
  return kept->insert(text).first->c_str();
}

}  // namespace

void set_last_error(const std::string& text) {
  std::lock_guard<std::mutex> lock(last_mutex);
  last_text() = text;
}

ncclResult_t fail(ncclResult_t code, const std::string& text) {
  set_last_error(text);
  return code;
}

void set_async_error(Rank& rank, ncclResult_t code, const std::string& text) {
  if (rank.error == ncclSuccess) {
    rank.error = code;
    rank.last_error = text;
  }
  set_last_error(text);
  rank.world->bump();
}

}  // namespace brigade::emu::nccl

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (a CUDA call failed; run with the emulator's messages)";
    case ncclSystemError: return "unhandled system error (a system call or the rendezvous failed)";
    case ncclInternalError: return "internal error (NCCL found it inside, e.g. links set up in mismatched directions)";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage (the program breaks NCCL's rules)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (comm != nullptr) {
    Rank& rank = *comm->rank;
    std::lock_guard<std::mutex> lock(rank.world->mutex);
    if (!rank.last_error.empty()) return keep(rank.last_error);
  }
  std::lock_guard<std::mutex> lock(last_mutex);
  return keep(last_text());
}

// ncclCommGetAsyncError: the rank's asynchronous error if it has one, else ncclInProgress while an
// init, split or finalize of a non-blocking communicator is under way, else ncclSuccess.
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr)
    return fail(ncclInvalidArgument, "ncclCommGetAsyncError: a NULL argument");
  Rank& rank = *comm->rank;
  std::lock_guard<std::mutex> lock(rank.world->mutex);
  if (rank.error != ncclSuccess) *async_error = rank.error;
  else *async_error = rank.jobs > 0 ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}
