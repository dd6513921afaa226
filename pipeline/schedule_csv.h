// Schedule files in PyTorch's CSV format: bring a schedule from PyTorch (or write one by hand) and
// run it here, or hand brigade's schedules to PyTorch.
//
// The format is the compute-only one of torch.distributed.pipelining's _PipelineScheduleRuntime
// (_dump_csv / _load_csv): one row per rank, rank 0 first, one cell per step:
//
//   0F0,0F1,0F2,3F0,3I0,3W0,...        stage 0 forwards micro-batches 0..2, then stage 3 ...
//   1F0,1F1,2F0,1F2,2I0,...
//
// A cell is <stage><action><micro-batch>: the global stage index, F (forward), B (the whole
// backward), I (its input-gradient half) or W (its weight-gradient half), and the micro-batch index.
// An empty cell is an idle slot (PyTorch's generators pad with them to keep ranks in lock-step);
// brigade's runtime never idles on purpose, so they are skipped. Rows may differ in length.
//
// Nothing else is in the file: which stages live on which rank is read off the rows (a stage on two
// rows is an error), and must be one of brigade's placements — interleaved (stage s on rank s % P) or
// the V (pipeline/action.h); P is the number of rows, S the number of stages, V = S / P, and M one more
// than the largest micro-batch. Every stage must run F and either B or I and W exactly once for
// every micro-batch. The messages are not in the file: schedule_from_file() places them in
// lock-step (MessagePlacement::lock_step), which no compute order can deadlock.
//
// An overlapped pair — a forward and a backward of another micro-batch run side by side, as
// DualPipeV writes them — is one cell, "(0F1;3B0)OVERLAP_F_B": it reads as the two actions with the
// F marked overlapped (Action::overlapped), and is written back the same way.
//
// Not read: PyTorch's compute_comms format (SEND_F, RECV_B, ... cells), FSDP's UNSHARD / RESHARD and
// REDUCE_GRAD — each refused by name.
//
// Errors name the file, the row (rank) and the cell, counted from 1 as a spreadsheet shows them.
#pragma once

#include <string>
#include <vector>

#include "pipeline/schedule.h"

namespace brigade::pipeline {

// A schedule file, read: its compute-only schedule and where each action stood.
struct ScheduleFile {
  std::string path;
  Schedule schedule;                    // compute only; name = path; layout and M inferred
  std::vector<std::vector<int>> cells;  // cells[rank][i]: the 1-based cell of the rank's i-th action
};

// Parses `text` (the contents of `path`, which only names it in errors). Throws an Error naming the
// file, row and cell: a cell that is not an action, an action brigade does not run, a stage on two
// ranks, a missing stage or micro-batch, work done twice, a placement that is neither interleaved
// nor a V.
ScheduleFile parse_schedule_csv(const std::string& text, const std::string& path);
// Reads and parses the file at `path`.
ScheduleFile read_schedule_csv(const std::string& path);

// The file's schedule with its messages, checked to run: every dependency met, nothing waiting in a
// cycle (the simulator's checks). An order that can never finish is an Error naming the file and,
// for every stuck rank, its row, the cell it is stuck at and the input that cell waits for.
Schedule schedule_from_file(const ScheduleFile& file);

// The compute actions of `schedule` in PyTorch's format, one row per rank, no idle cells; lines end
// in "\r\n" as Python's csv module writes them.
std::string schedule_csv(const Schedule& schedule);
// Writes schedule_csv() to `path` atomically (a temporary file renamed over it: nothing half-written
// is ever at `path`).
void write_schedule_csv(const std::string& path, const Schedule& schedule);

}  // namespace brigade::pipeline
