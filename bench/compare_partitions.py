#!/usr/bin/env python3
"""Two (or more) ways of cutting the same training into pipeline stages, timed side by side.

    bench/compare_partitions.py [--brigade build/tools/brigade] [--rounds 5] [--steps 1000]
                                [--partitions balanced,layers] [--svg-dir DIR] [-- TRAIN FLAGS...]

Runs `brigade train --partition P` for each partition in turn, round after round (interleaved, so a
slow spell of the machine falls on all of them alike), and prints for each the median over the rounds
of: the measured bubble of the last step, the simulator's bubble on each stage's measured costs,
tokens per second, and its speed relative to the first partition. The last round of each writes its
measured-vs-simulated timeline to DIR/<partition>.svg when --svg-dir is given. Extra flags after `--`
go to every run (e.g. `-- --stages 4 --microbatches 16`). Installs nothing; needs a built brigade.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

BUBBLE = re.compile(r"bubble \(last step\): measured ([0-9.]+); simulator [0-9.]+ with unit costs, ([0-9.]+) with each")
SPEED = re.compile(r"steps in [0-9.]+s \(([0-9]+) tok/s\)")


def run(brigade, partition, steps, svg, extra):
    args = [brigade, "train", "--partition", partition, "--steps", str(steps), "--trace", "none",
            "--svg", svg or "none"] + extra
    out = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    bubble, speed = BUBBLE.search(out.stdout), SPEED.search(out.stdout)
    if not bubble or not speed:
        sys.exit(f"{' '.join(args)}: no bubble or tok/s line in its output:\n{out.stdout}")
    return float(bubble.group(1)), float(bubble.group(2)), float(speed.group(1))


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--brigade", default="build/tools/brigade")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--partitions", default="balanced,layers")
    p.add_argument("--svg-dir", default="")
    o = p.parse_args(argv)
    partitions = o.partitions.split(",")
    if o.svg_dir:
        os.makedirs(o.svg_dir, exist_ok=True)
    results = {name: [] for name in partitions}
    for round_ in range(o.rounds):
        for name in partitions:
            last = round_ == o.rounds - 1
            svg = os.path.join(o.svg_dir, name + ".svg") if o.svg_dir and last else ""
            results[name].append(run(o.brigade, name, o.steps, svg, extra))
            print(f"round {round_ + 1}/{o.rounds} {name}: bubble {results[name][-1][0]:.3f} measured, "
                  f"{results[name][-1][1]:.3f} simulated, {results[name][-1][2]:.0f} tok/s", file=sys.stderr)
    base = statistics.median(r[2] for r in results[partitions[0]])
    print(f"{'partition':<10}  {'bubble measured':>15}  {'simulated':>9}  {'tok/s':>8}  {'speed vs ' + partitions[0]:>18}")
    for name in partitions:
        measured = statistics.median(r[0] for r in results[name])
        simulated = statistics.median(r[1] for r in results[name])
        speed = statistics.median(r[2] for r in results[name])
        print(f"{name:<10}  {measured:>15.3f}  {simulated:>9.3f}  {speed:>8.0f}  {speed / base:>18.3f}")
    print(f"(medians of {o.rounds} interleaved rounds of {o.steps} steps each)")


if __name__ == "__main__":
    main()
