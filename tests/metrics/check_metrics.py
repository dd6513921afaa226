#!/usr/bin/env python3
"""`brigade train --metrics` and its loss curves, checked from outside, as a user would read them.

    check_metrics.py BRIGADE_CLI

Trains a tiny language model (a two-stage pipeline, on token shards written here) and checks, each
against an independent reference:
  - the metrics file holds one record per progress line and per validation, in the order printed,
    with the printed losses and learning rates;
  - the loss-curve SVG parses as XML, and its plotted points, mapped back through its own axis ticks,
    are the recorded losses at the recorded steps;
  - `brigade curves` redraws the very same bytes from the metrics file;
  - a run interrupted after a checkpoint and resumed leaves a file equal to the uninterrupted run's,
    time-like fields apart (tokens/s, MFU, peak memory, elapsed, time).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
TIME_LIKE = {"tokens_per_second", "mfu", "peak_memory_bytes", "elapsed_s", "time"}


def write_shard(path, tokens):
    # llm.c's format: 256 little-endian int32 (magic, version, token count), then uint16 tokens.
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{len(tokens)}H", *tokens))


def train(cli, args, what):
    result = subprocess.run([cli, "train"] + args, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        sys.exit(f"{what}: brigade train failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def read_records(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def printed_reports(out):
    """(kind, step, loss, lr) of the progress and validation lines, in the order printed."""
    reports = []
    for line in out.splitlines():
        m = re.match(r"step\s+(\d+)/\d+\s+loss=(\S+)\s+lr=(\S+)", line)
        if m:
            reports.append(("train", int(m[1]), float(m[2]), float(m[3])))
        m = re.match(r"validation loss (\S+) at step (\d+)", line)
        if m:
            reports.append(("validation", int(m[2]), float(m[1]), None))
    return reports


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


def check_against_output(records, out):
    reports = printed_reports(out)
    check(len(reports) > 0, "no progress lines in the output:\n" + out)
    check([(r["kind"], r["step"]) for r in records] == [(k, s) for k, s, _, _ in reports],
          f"records {[(r['kind'], r['step']) for r in records]} are not the printed lines {reports}")
    for r, (kind, step, loss, lr) in zip(records, reports):
        recorded = r["loss"] if kind == "train" else r["validation_loss"]
        check(f"{recorded:.4f}" == f"{loss:.4f}", f"step {step} {kind}: recorded {recorded}, printed {loss}")
        if lr is not None:
            check(f"{r['lr']:.1e}" == f"{lr:.1e}", f"step {step}: recorded lr {r['lr']}, printed {lr}")
        peaks = r["peak_memory_bytes"]
        check(len(peaks) == 2 and all(p > 0 for p in peaks), f"step {step}: peak memory of 2 ranks, got {peaks}")
        check(r["elapsed_s"] >= 0 and r["time"] > 1.6e9, f"step {step}: times {r['elapsed_s']} {r['time']}")


def axis_map(ticks):
    """The linear map from a coordinate to a value, from the axis' own ticks (coordinate, value)."""
    (c0, v0), (c1, v1) = min(ticks), max(ticks)
    return lambda c: v0 + (c - c0) * (v1 - v0) / (c1 - c0), abs((v1 - v0) / (c1 - c0))


def check_curves(svg_path, records):
    root = ET.parse(svg_path).getroot()  # raises on anything that is not well-formed XML
    check(root.tag == SVG + "svg", f"{svg_path}: the root is {root.tag}")
    panel = next(g for g in root.iter(SVG + "g") if g.get("id") == "loss")

    def ticks(css_class, coordinate):
        found = []
        for g in panel.iter(SVG + "g"):
            if g.get("class") == css_class:
                found.append((float(g.find(SVG + "line").get(coordinate)), float(g.find(SVG + "text").text)))
        check(len(found) >= 2, f"{svg_path}: fewer than two {css_class}s")
        return found

    to_step, step_unit = axis_map(ticks("x-tick", "x1"))
    to_loss, loss_unit = axis_map(ticks("y-tick", "y1"))
    for css_class, kind, field in [("training", "train", "loss"), ("validation", "validation", "validation_loss")]:
        line = next(p for p in panel.iter(SVG + "polyline") if p.get("class") == css_class)
        points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
        wanted = [(r["step"], r[field]) for r in records if r["kind"] == kind]
        check(len(points) == len(wanted), f"{css_class}: {len(points)} points for {len(wanted)} records")
        for (x, y), (step, value) in zip(points, wanted):
            # Coordinates are written to a tenth of a unit: a point may be off by half of that.
            check(abs(to_step(x) - step) <= 0.06 * step_unit, f"{css_class}: x {x} is step {to_step(x)}, not {step}")
            check(abs(to_loss(y) - value) <= 0.06 * loss_unit, f"{css_class}: y {y} is {to_loss(y)}, not {value}")


def main():
    cli = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="brigade-metrics-test.")
    try:
        os.chdir(work)
        os.mkdir("data")
        # A sequence with structure to learn: counting up modulo the vocabulary, with jumps.
        tokens = [(i * 7 + (i // 5)) % 64 for i in range(6000)]
        write_shard("data/train_000000.bin", tokens[:5000])
        write_shard("data/val_000000.bin", tokens[5000:])
        common = ["--data", "data", "--vocab", "64", "--context", "16", "--layers", "2", "--heads", "2",
                  "--embd", "16", "--batch", "4", "--microbatches", "2", "--stages", "2", "--steps", "12",
                  "--warmup", "2", "--log-every", "2", "--eval-every", "4", "--eval", "4", "--threads", "1",
                  "--device", "cpu", "--trace", "none", "--svg", "none"]

        out = train(cli, common + ["--metrics", "whole.jsonl", "--curves", "whole.svg"], "the whole run")
        records = read_records("whole.jsonl")
        check_against_output(records, out)
        check("loss curves: whole.svg" in out, "the run does not say where its loss curves are:\n" + out)
        check_curves("whole.svg", records)

        redraw = subprocess.run([cli, "curves", "--metrics", "whole.jsonl", "--out", "redrawn.svg"],
                                capture_output=True, text=True, timeout=60)
        check(redraw.returncode == 0, "brigade curves failed:\n" + redraw.stderr)
        check(open("redrawn.svg", "rb").read() == open("whole.svg", "rb").read(),
              "brigade curves drew other bytes than the run")

        # Interrupted after the checkpoint of step 8: the run went on to step 12 and wrote those
        # records, but its later checkpoint is lost, so the next run resumes from step 8.
        resumable = common + ["--metrics", "resumed.jsonl", "--curves", "none", "--save", "ckpt/", "--save-every", "4"]
        train(cli, resumable, "the run to interrupt")
        check(read_records("resumed.jsonl")[-1]["step"] == 12, "the first run did not reach step 12")
        shutil.rmtree("ckpt/step-00000012")
        # The run died mid-write: its last line is cut short, without its newline. The resumed run
        # drops it (it is no record) rather than refusing to start.
        with open("resumed.jsonl", "a") as f:
            f.write('{"kind":"train","step":13,"lo')
        out = train(cli, resumable, "the resumed run")
        check("resumed from ckpt/step-00000008 at step 8" in out, "the run did not resume from step 8:\n" + out)
        resumed = read_records("resumed.jsonl")
        strip = lambda rs: [{k: v for k, v in r.items() if k not in TIME_LIKE} for r in rs]
        check(open("resumed.jsonl").read().endswith("}\n"), "the resumed run left the cut-short line in the file")
        check(strip(resumed) == strip(records),
              f"the resumed run's metrics differ from the uninterrupted run's:\n{strip(resumed)}\n{strip(records)}")
        print(f"metrics: {len(records)} records match the output, the curves and a resumed run")
    finally:
        os.chdir("/")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
