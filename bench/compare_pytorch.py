#!/usr/bin/env python3
"""brigade's GPT training step beside PyTorch's, on the CPU or a GPU, in one run.

For each model configuration and thread count, the same GPT (token and position embeddings, pre-norm
blocks of causal self-attention and a GELU MLP, a final LayerNorm, the head tied to the token
embedding; cross-entropy; AdamW) is trained on random tokens by `brigade bench step` and by PyTorch,
each in a fresh process. The two alternate, round after round, so that anything else the machine does
lands on both alike; each round reports the median step after warm-up, and the table gives the median
over rounds and the speed ratio PyTorch time / brigade time (above 1: brigade is faster) — of wall
time, and of the CPU time the process used (all threads), which on a machine shared with other work
moves much less than wall time (with one thread it is the steadier comparison).

Memory: each process's peak resident set (the operating system's count: code, libraries and tensors),
and brigade's peak of bytes held by tensors (its allocator's count).

On a GPU (--device cuda) both sides compute in --precision (f32, or bf16 with f32 weights: brigade's
bf16 mode and PyTorch's autocast), every step ends in a device synchronisation, the CPU-time columns
are left out, and memory is each side's peak of device bytes held by tensors (PyTorch's
max_memory_allocated, brigade's allocator count). --compile adds a PyTorch row under torch.compile
(its compilation is in the warm-up, not the timing).

This is a benchmark, not a test: it installs nothing and runs only where PyTorch is importable.

    python3 bench/compare_pytorch.py                      # every CPU configuration, 1 and 2 threads
    python3 bench/compare_pytorch.py --configs tiny --threads 2 --rounds 5
    python3 bench/compare_pytorch.py --device cuda --precision bf16 --configs gpt2 --compile
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# name: layers, width, heads, sequence length, batch, vocabulary. The first two are the
# configurations the issue "Speed on both backends" measured (the default `brigade train` model
# and a 4 x 256 model); the third is larger.
CONFIGS = {
    "tiny": dict(layers=2, embd=64, heads=4, seq=24, batch=32, vocab=16),
    "medium": dict(layers=4, embd=256, heads=4, seq=128, batch=8, vocab=256),
    "large": dict(layers=6, embd=384, heads=6, seq=256, batch=8, vocab=256),
    # GPT-2 small (124M parameters; the vocabulary padded to a multiple of 64, as llm.c does): a GPU size.
    "gpt2": dict(layers=12, embd=768, heads=12, seq=1024, batch=8, vocab=50304),
}


def pytorch_worker(cfg, threads, steps, warmup, device="cpu", precision="f32", compile=False):
    """Runs in its own process: times PyTorch (eager, or compiled) on cfg and prints one JSON line."""
    import contextlib
    import time

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.set_default_device(device)
    torch.manual_seed(1)
    L, C, H, T, B, V = (cfg[k] for k in ("layers", "embd", "heads", "seq", "batch", "vocab"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, H, C // H).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, C))
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT()
    forward = torch.compile(model) if compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, V, (B, T))
    targets = torch.randint(0, V, (B, T))
    cuda = device == "cuda"
    autocast = torch.autocast("cuda", torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

    def step():
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = forward(idx, targets)
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times, cpu_times = [], []
    for _ in range(steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        cpu_times.append((time.process_time() - cpu_start) * 1e3)
        times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"median_ms": statistics.median(times), "cpu_ms": statistics.median(cpu_times),
                      "device_peak_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
                      "torch": torch.__version__}))


def run_child(argv):
    """Runs argv; returns its stdout, or stops with its error output."""
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout


def measured(argv):
    """Runs argv; returns (its stdout, its peak resident set in MiB)."""
    # RUSAGE_CHILDREN keeps the largest peak of all children so far, so each run goes through a fresh
    # Python process that has exactly one child: its count is that child's peak alone.
    wrapper = (
        "import resource, subprocess, sys, json\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stderr.write(p.stderr)\n"
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout,"
        " 'rss_mib': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))\n"
    )
    result = json.loads(run_child([sys.executable, "-c", wrapper] + argv))
    if result["rc"] != 0:
        sys.exit(f"{' '.join(argv)} failed ({result['rc']})")
    return result["out"], result["rss_mib"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brigade", default=os.path.join(os.path.dirname(__file__), "..", "build", "tools", "brigade"),
                        help="the brigade binary [build/tools/brigade]")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated: " + ", ".join(CONFIGS))
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts [1,2]")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per row [3]")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round [10]")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per round [3]")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where both sides run [cpu]")
    parser.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                        help="compute precision on a GPU (weights stay f32) [f32]")
    parser.add_argument("--compile", action="store_true", help="also time PyTorch under torch.compile")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run PyTorch on this JSON config
    args = parser.parse_args()

    if args.worker:
        w = json.loads(args.worker)
        pytorch_worker(w["cfg"], w["threads"], w["steps"], w["warmup"], w["device"], w["precision"], w["compile"])
        return
    if args.device == "cpu" and (args.precision != "f32" or args.compile):
        sys.exit("compare_pytorch.py: --precision bf16 and --compile are for --device cuda")
    if args.device == "cuda":
        gpu_main(args)
        return
    try:
        import torch  # noqa: F401  (only to say early that it is missing)
    except ImportError:
        sys.exit("compare_pytorch.py: PyTorch is not importable here; this benchmark needs it (it installs nothing)")
    if not os.path.exists(args.brigade):
        sys.exit(f"compare_pytorch.py: no brigade binary at {args.brigade} (build first, or pass --brigade)")

    rows = []
    header = f"{'config':<8} {'threads':>7} {'brigade ms':>10} {'PyTorch ms':>10} {'speed':>7} " \
             f"{'CPU ms: brigade':>15} {'PyTorch':>8} {'speed':>7} " \
             f"{'brigade RSS':>11} {'PyTorch RSS':>11} {'brigade tensors':>15}"
    print(header)
    print("-" * len(header))
    for name in args.configs.split(","):
        cfg = CONFIGS[name]
        for threads in (int(t) for t in args.threads.split(",")):
            ours, theirs, our_cpu, their_cpu, our_rss, their_rss, tensors = [], [], [], [], [], [], []
            with tempfile.TemporaryDirectory() as tmp:
                report = os.path.join(tmp, "step.json")
                for _ in range(args.rounds):
                    flags = [f"--{k}={v}" for k, v in cfg.items()]
                    _, rss = measured([args.brigade, "bench", "step", *flags, f"--threads={threads}",
                                       f"--steps={args.steps}", f"--warmup={args.warmup}", f"--json={report}"])
                    with open(report) as f:
                        r = json.load(f)
                    ours.append(r["step_ms"]["median"])
                    our_cpu.append(r["cpu_ms"]["median"])
                    tensors.append(r["peak_bytes"] / 2**20)
                    our_rss.append(rss)
                    worker = json.dumps(dict(cfg=cfg, threads=threads, steps=args.steps, warmup=args.warmup,
                                             device="cpu", precision="f32", compile=False))
                    out, rss = measured([sys.executable, __file__, "--worker", worker])
                    theirs.append(json.loads(out)["median_ms"])
                    torch_version = json.loads(out)["torch"]
                    their_cpu.append(json.loads(out)["cpu_ms"])
                    their_rss.append(rss)
            row = dict(config=name, threads=threads, brigade_ms=statistics.median(ours),
                       pytorch_ms=statistics.median(theirs), brigade_cpu_ms=statistics.median(our_cpu),
                       pytorch_cpu_ms=statistics.median(their_cpu), brigade_rss_mib=max(our_rss),
                       pytorch_rss_mib=max(their_rss), brigade_tensor_peak_mib=max(tensors), **cfg,
                       environment=environment_of(r, torch_version))
            row["speed"] = row["pytorch_ms"] / row["brigade_ms"]
            row["cpu_speed"] = row["pytorch_cpu_ms"] / row["brigade_cpu_ms"]
            rows.append(row)
            print(f"{name:<8} {threads:>7} {row['brigade_ms']:>10.2f} {row['pytorch_ms']:>10.2f} "
                  f"{row['speed']:>6.2f}x {row['brigade_cpu_ms']:>15.2f} {row['pytorch_cpu_ms']:>8.2f} "
                  f"{row['cpu_speed']:>6.2f}x {row['brigade_rss_mib']:>8.0f} MiB {row['pytorch_rss_mib']:>8.0f} MiB "
                  f"{row['brigade_tensor_peak_mib']:>11.1f} MiB", flush=True)
    write_json(args.json, rows)


def gpu_main(args):
    """The GPU table: brigade, PyTorch eager and (with --compile) torch.compile, alternating."""
    import torch

    if not torch.cuda.is_available():
        sys.exit("compare_pytorch.py: --device cuda, but PyTorch sees no GPU here")
    print(f"GPU: {torch.cuda.get_device_name()}, precision {args.precision}, torch {torch.__version__}")
    kinds = ["eager"] + (["compile"] if args.compile else [])
    header = f"{'config':<8} {'brigade ms':>10} " + " ".join(f"{k + ' ms':>10} {'speed':>7}" for k in kinds) + \
             f" {'brigade MiB':>11} " + " ".join(f"{k + ' MiB':>11}" for k in kinds)
    print(header)
    print("-" * len(header))
    rows = []
    for name in args.configs.split(","):
        cfg = CONFIGS[name]
        ours, tensors, theirs, their_mem = [], [], {k: [] for k in kinds}, {k: [] for k in kinds}
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "step.json")
            for _ in range(args.rounds):
                flags = [f"--{k}={v}" for k, v in cfg.items()]
                run_child([args.brigade, "bench", "step", *flags, "--device=cuda", f"--precision={args.precision}",
                           f"--steps={args.steps}", f"--warmup={args.warmup}", f"--json={report}"])
                with open(report) as f:
                    r = json.load(f)
                ours.append(r["step_ms"]["median"])
                tensors.append(r["peak_bytes"] / 2**20)
                print(f"  {name}: brigade {ours[-1]:.2f} ms", file=sys.stderr, flush=True)
                for kind in kinds:
                    worker = json.dumps(dict(cfg=cfg, threads=1, steps=args.steps, warmup=args.warmup, device="cuda",
                                             precision=args.precision, compile=kind == "compile"))
                    out = json.loads(run_child([sys.executable, __file__, "--worker", worker]))
                    torch_version = out["torch"]
                    theirs[kind].append(out["median_ms"])
                    their_mem[kind].append(out["device_peak_bytes"] / 2**20)
                    print(f"  {name}: PyTorch {kind} {theirs[kind][-1]:.2f} ms", file=sys.stderr, flush=True)
        row = dict(config=name, device="cuda", precision=args.precision, brigade_ms=statistics.median(ours),
                   brigade_tensor_peak_mib=max(tensors), **cfg, environment=environment_of(r, torch_version))
        for kind in kinds:
            row[f"pytorch_{kind}_ms"] = statistics.median(theirs[kind])
            row[f"pytorch_{kind}_speed"] = row[f"pytorch_{kind}_ms"] / row["brigade_ms"]
            row[f"pytorch_{kind}_peak_mib"] = max(their_mem[kind])
        rows.append(row)
        print(f"{name:<8} {row['brigade_ms']:>10.2f} " +
              " ".join(f"{row[f'pytorch_{k}_ms']:>10.2f} {row[f'pytorch_{k}_speed']:>6.2f}x" for k in kinds) +
              f" {row['brigade_tensor_peak_mib']:>11.0f} " +
              " ".join(f"{row[f'pytorch_{k}_peak_mib']:>11.0f}" for k in kinds), flush=True)
    write_json(args.json, rows)


ENVIRONMENT_FIELDS = ("date", "git_commit", "device", "cpu", "gpu", "driver_version", "driver_cuda_version",
                      "cuda_runtime_version")


def environment_of(report, torch_version):
    """The machine and build a row was measured on: brigade's own record of them, and PyTorch's version."""
    env = {k: report[k] for k in ENVIRONMENT_FIELDS if k in report}
    env["torch"] = torch_version
    return env


def write_json(path, rows):
    """Writes rows to path atomically (a temporary file, then a rename); nothing without a path."""
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(rows, f, indent=2)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
