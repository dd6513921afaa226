#include "pipeline/analysis/grid.h"

#include <algorithm>
#include <sstream>

namespace brigade::pipeline {

std::string action_grid(const Schedule& schedule, const std::vector<GridMark>& marks) {
  const int ranks = int(schedule.actions.size());
  size_t steps = 0;
  for (const auto& list : schedule.actions) steps = std::max(steps, list.size());
  for (const GridMark& m : marks) steps = std::max(steps, size_t(std::max(m.step, 0)) + 1);

  // cells[rank][step]; a mark past the end of a list shows as "(end)".
  std::vector<std::vector<std::string>> cells(static_cast<size_t>(ranks));
  for (auto& column : cells) column.resize(steps);
  for (int r = 0; r < ranks; ++r) {
    const auto& list = schedule.actions[size_t(r)];
    for (size_t i = 0; i < list.size(); ++i)
      cells[size_t(r)][i] = std::string(1, ' ').append(short_name(list[i], r, schedule.layout));
  }
  for (const GridMark& m : marks) {
    if (m.rank < 0 || m.rank >= ranks || m.step < 0) continue;
    std::string& cell = cells[size_t(m.rank)][size_t(m.step)];
    if (cell.empty()) cell = " (end)";
    cell[0] = m.symbol;  // the leading space is the mark's slot, so columns stay aligned
  }

  const std::string step_header = "step";
  size_t width = 0;
  for (int r = 0; r < ranks; ++r) width = std::max(width, (" rank " + std::to_string(r)).size());
  for (const auto& column : cells)
    for (const auto& cell : column) width = std::max(width, cell.size());

  std::ostringstream os;
  auto pad = [&](const std::string& text) { return text + std::string(width - text.size() + 2, ' '); };
  os << step_header << "  ";
  for (int r = 0; r < ranks; ++r) os << pad(" rank " + std::to_string(r));
  os << "\n";
  for (size_t i = 0; i < steps; ++i) {
    std::string number = std::to_string(i);
    os << std::string(step_header.size() - std::min(step_header.size(), number.size()), ' ') << number << "  ";
    for (int r = 0; r < ranks; ++r) os << pad(cells[size_t(r)][i]);
    os << "\n";
  }
  // Trailing spaces make diffs and terminals noisy.
  std::string text = os.str();
  std::string out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

}  // namespace brigade::pipeline
