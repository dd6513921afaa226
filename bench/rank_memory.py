#!/usr/bin/env python3
"""Peak memory of a pipeline's busiest rank against one device, measured by the OS.

Runs the same parameter-dominated GPT (by default 16 blocks, 512 wide: 50M parameters, f32, a small
batch, so weights, gradients and AdamW's moments dominate) three ways on the CPU, each ending with a
save and an evaluation as a user's run does:

  - a tiny model, for what a brigade process holds before any model (libraries, the runtime);
  - one device (`brigade train --stages 0`);
  - four processes (`brigade launch -n 4 -- brigade train --stages 4`, gloo), one stage each.

Every process runs under /usr/bin/time, whose maximum resident set size is the kernel's (getrusage),
nothing brigade counts itself. The report gives each run's peak net of the tiny run's, and the busiest
rank's share of one device's: what pipelining four ways saves per device.

  python3 bench/rank_memory.py [--brigade build/tools/brigade] [--json FILE]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

TIME = "/usr/bin/time"


def peak_kib(text):
    """The maximum resident set sizes /usr/bin/time printed (KiB), per rank when launched."""
    peaks = {}
    for line in text.splitlines():
        m = re.search(r"(?:\[rank (\d+)\] )?peak-rss-kib (\d+)", line)
        if m:
            peaks[int(m.group(1) or 0)] = int(m.group(2))
    return peaks


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    if result.returncode != 0:
        sys.exit("failed (exit %d): %s\n%s" % (result.returncode, " ".join(command), result.output[-3000:]))
    return result.stdout


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brigade", default=os.path.join(here, "..", "build", "tools", "brigade"))
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--embd", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", help="also write the numbers as JSON")
    args = parser.parse_args()
    if not os.access(TIME, os.X_OK):
        sys.exit("needs " + TIME + " (Debian: apt-get install time)")
    timed = [TIME, "-f", "peak-rss-kib %M"]
    common = ["--batch", "8", "--microbatches", "4", "--digits", "4", "--eval", "20", "--threads", "1",
              "--device", "cpu", "--trace", "none", "--svg", "none", "--log-every", "1"]
    model = ["--layers", str(args.layers), "--embd", str(args.embd), "--heads", str(args.heads),
             "--steps", str(args.steps)]
    with tempfile.TemporaryDirectory() as tmp:
        tiny = peak_kib(run(timed + [args.brigade, "train", "--stages", "0", "--layers", "1", "--embd", "16",
                                     "--heads", "1", "--steps", "1", "--save", tmp + "/tiny/"] + common))[0]
        one = peak_kib(run(timed + [args.brigade, "train", "--stages", "0", "--save", tmp + "/one/"] + model + common))[0]
        ranks = peak_kib(run([args.brigade, "launch", "-n", "4", "--"] + timed +
                             [args.brigade, "train", "--stages", "4", "--save", tmp + "/four/"] + model + common))
    if sorted(ranks) != [0, 1, 2, 3]:
        sys.exit("expected four ranks' peaks, got %s" % ranks)
    net_one = one - tiny
    busiest = max(ranks, key=lambda r: ranks[r])
    ratio = (ranks[busiest] - tiny) / net_one
    print("tiny run (the process itself): %.0f MiB" % (tiny / 1024))
    print("one device: %.0f MiB, %.0f MiB net" % (one / 1024, net_one / 1024))
    for r in sorted(ranks):
        print("4 stages, rank %d: %.0f MiB, %.0f MiB net (%.2f of one device)" %
              (r, ranks[r] / 1024, (ranks[r] - tiny) / 1024, (ranks[r] - tiny) / net_one))
    print("busiest rank / one device, net of the process: %.3f" % ratio)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "bench/rank_memory.py", "layers": args.layers, "embd": args.embd,
                       "heads": args.heads, "steps": args.steps, "tiny_kib": tiny, "one_device_kib": one,
                       "ranks_kib": [ranks[r] for r in sorted(ranks)], "busiest_over_one_device": ratio}, f, indent=2)


if __name__ == "__main__":
    main()
