#!/usr/bin/env python3
"""The GPU session's rank-memory stage (scripts/gpu-session.sh) as JSON and markdown for bench/results/.

Reads the one-device run's output (which should end in the out-of-memory message), the four-rank
launch's (its memory report: each rank's predicted and measured device peak over the last step), and
the launch's --metrics file (each rank's device peak, from its own allocator account), and writes
OUT.json and OUT.md. Prints one line for the session's summary.

  python3 bench/rank_memory_report.py --one ONE.log --four FOUR.log --metrics M.jsonl --limit 0.25 --out STEM
"""
import argparse
import json
import re


def last_peaks(path):
    """peak_memory_bytes of the metrics file's last record: one number per rank."""
    try:
        records = [json.loads(line) for line in open(path) if line.strip()]
    except OSError:
        return []
    return records[-1].get("peak_memory_bytes", []) if records else []


def exit_code(text):
    m = re.search(r"^exit (\d+)\s*$", text, re.M)
    return int(m.group(1)) if m else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("--one", "--four", "--metrics", "--limit", "--out"):
        parser.add_argument(flag, required=True)
    args = parser.parse_args()
    one, four = open(args.one).read(), open(args.four).read()
    oom = re.search(r"out of memory on cuda:\d+: [^\n]*", one)
    model = re.search(r"model: [^\n]*", four) or re.search(r"model: [^\n]*", one)
    ranks = re.findall(r"  rank (\d+): predicted ([^,(]*)[^,]*, measured ([^,]*), measured/predicted ([0-9.]+)", four)
    peaks = last_peaks(args.metrics)
    result = {
        "benchmark": "scripts/gpu-session.sh rank-memory",
        "memory_limit": args.limit,
        "model": model.group(0) if model else None,
        "one_device": {"exit": exit_code(one), "out_of_memory": oom.group(0) if oom else None},
        "four_ranks": {
            "exit": exit_code(four),
            "peak_memory_bytes": peaks,
            "last_step": [{"rank": int(r), "predicted": p.strip(), "measured": m, "measured_over_predicted": float(q)}
                          for r, p, m, q in ranks],
        },
    }
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=2)
    with open(args.out + ".md", "w") as md:
        md.write("# Four pipeline ranks on one GPU, each limited to `--memory-limit %s`\n\n" % args.limit)
        md.write("%s\n\n" % (result["model"] or "model: (not printed)"))
        md.write("One device under the same limit: exit %s, %s\n\n" %
                 (result["one_device"]["exit"], "`%s`" % oom.group(0) if oom else "no out-of-memory message"))
        md.write("`brigade launch -n 4 -- brigade train --stages 4`: exit %s\n\n" % result["four_ranks"]["exit"])
        md.write("| rank | predicted (last step) | measured (device) | measured / predicted | run's peak (--metrics) |\n")
        md.write("|---|---|---|---|---|\n")
        for r, p, m, q in ranks:
            peak = "%.2f GiB" % (peaks[int(r)] / 2**30) if int(r) < len(peaks) else "-"
            md.write("| %s | %s | %s | %s | %s |\n" % (r, p.strip(), m, q, peak))
    print("one device exit %s (%s); 4 ranks exit %s, device peaks %s" %
          (result["one_device"]["exit"], "out of memory" if oom else "no out-of-memory message",
           result["four_ranks"]["exit"], " ".join("%.2f GiB" % (b / 2**30) for b in peaks) or "none"))


if __name__ == "__main__":
    main()
