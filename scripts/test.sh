#!/usr/bin/env bash
# Runs the whole test suite and ends with one summary line:
#   tests: N passed, N failed, N skipped
# Exits non-zero when a test failed (or the suite could not run). Extra arguments go to
# `meson test`, e.g. `bash scripts/test.sh core autograd` runs two suites.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
build_dir=${BUILD_DIR:-build}
log="$build_dir/meson-logs/testlog.json"

rm -f "$log"  # a stale log from an earlier run must not be counted
meson test -C "$build_dir" --print-errorlogs "$@"
status=$?

# testlog.json holds one JSON object per test; meson is Python, so python3 is always here.
summary=$(python3 - "$log" <<'PY'
import json, os, sys
counts = {"passed": 0, "failed": 0, "skipped": 0}
kind = {"OK": "passed", "EXPECTEDFAIL": "passed", "SKIP": "skipped"}  # everything else is a failure
path = sys.argv[1]
if os.path.exists(path):
    for line in open(path):
        if line.strip():
            counts[kind.get(json.loads(line)["result"], "failed")] += 1
print(counts["passed"], counts["failed"], counts["skipped"])
PY
) || summary="0 0 0"
read -r passed failed skipped <<<"$summary"
echo "tests: $passed passed, $failed failed, $skipped skipped"

if ((failed > 0)); then exit 1; fi
exit "$status"
