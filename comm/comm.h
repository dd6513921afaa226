// comm/ — moving tensors between ranks: one Communicator for threads (local), CPU processes (gloo)
// and GPUs (nccl). Start with communicator.h; docs/comm.md tells the whole story.
#pragma once

#include "comm/address.h"
#include "comm/communicator.h"
#include "comm/connect.h"
#include "comm/gloo.h"
#include "comm/launch_env.h"
#include "comm/local.h"
#include "comm/local_ranks.h"
#include "comm/nccl.h"
#include "comm/store.h"
