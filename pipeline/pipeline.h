// brigade::pipeline — pipeline parallelism, one include. Its headers, under pipeline/:
//
//   action.h              one step of one rank: F/B/I/W, SEND/RECV, and where each chunk sits
//   schedule.h            schedules as data: per rank, the ordered actions
//   slots.h               unit-time slots of a compute order (lock-step message placement)
//   schedule_csv.h        schedule files in PyTorch's CSV format, read and written
//   analysis/simulator.h  the dry run: dependency and deadlock checks, bubble, stashed activations, messages
//   analysis/timeline.h   drawing a simulated schedule (terminal text, SVG)
//   analysis/grid.h       the rank x step table of a schedule
//   partition.h           cutting a list of layers into balanced stages
//   exchange.h            a rank's list as blocking steps; the check that they cannot deadlock
//   trace.h               a measured step: bubble, Chrome trace JSON, drawn against the simulation
//   stage.h               what a rank runs: chunks of layers, the loss, tied weights, skip connections
//   executor.h            one rank walking its action list with real tensors
//   runtime.h             Pipeline: a training step across ranks (ties, replicas, global norm, tracing)
//   gpt_stages.h          a rank's chunks: of a GPT holding only its layers, or built from layer factories
//   gpt_decode.h          generation through a GPT's stages, each with the KV cache of its own blocks
// The planner and the memory prediction (analysis/planner.h, analysis/memory.h) are included
// where they are used.
#pragma once

#include "pipeline/action.h"
#include "pipeline/analysis/grid.h"
#include "pipeline/partition.h"
#include "pipeline/schedule.h"
#include "pipeline/schedule_csv.h"
#include "pipeline/slots.h"
#include "pipeline/analysis/simulator.h"
#include "pipeline/analysis/timeline.h"
#include "pipeline/exchange.h"
#include "pipeline/trace.h"
#include "pipeline/stage.h"
#include "pipeline/executor.h"
#include "pipeline/runtime.h"
#include "pipeline/gpt_stages.h"
#include "pipeline/gpt_decode.h"
