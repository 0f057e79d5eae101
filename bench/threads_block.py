"""Our norms between torch's matmuls: does switching between torch's intra-op pool and the library's cost
anything, at 1 and 2 threads (issue 17's oversubscription question)?

A block of `--layers` steps, each `h = norm(x); x = h @ W` (torch.mm on torch's pool, the norm on ours
or on torch's), timed with torch.set_num_threads(n) for each n in --threads. The calls from rmsnorm.torch
follow torch's thread count (docs/python.md, "Threads"). Rows: the block with torch's F.rms_norm, with
ours following torch's count, with ours pinned to the machine's cores whatever torch's count (the
oversubscribed case when torch has fewer), and with the matmuls alone; the norm's cost is the block's
time minus the matmuls' alone. Median of --samples round-robin samples, each the best of --repeat
blocks. One process, f32.

    python bench/threads_block.py                       # 64 x 2048 tokens x hidden, 8 layers, 1 and 2 threads
    python bench/threads_block.py --rows 1 --hidden 4096   # a decode step
"""
import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

import rmsnorm
import rmsnorm.torch as rt
from rmsnorm import _runtime


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--samples", type=int, default=15)
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()

    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(args.rows, args.hidden, generator=g)
    weights = [torch.randn(args.hidden, args.hidden, generator=g) / args.hidden ** 0.5 for _ in range(args.layers)]
    gains = [torch.rand(args.hidden, generator=g) + 0.5 for _ in range(args.layers)]
    cores = len(os.sched_getaffinity(0))

    def block(norm, pin=False):
        def run():
            # The library's count is process-wide: each block sets it as its variant has it. Setting it
            # makes the next call from torch take torch's count again, unless marked as done (pinned: as
            # if the library ignored torch's count and kept every core).
            rmsnorm.set_num_threads(cores)
            if pin:
                _runtime.threads_set_for_torch[0] = torch.get_num_threads()
            x = x0
            for w, gain in zip(weights, gains):
                x = torch.mm(norm(x, gain), w)
            return x
        return run

    ours = lambda x, gain: rt.rms_norm(x, (args.hidden,), gain, 1e-6)  # noqa: E731
    variants = {
        "F.rms_norm (torch)": block(lambda x, gain: F.rms_norm(x, (args.hidden,), gain, 1e-6)),
        "ours, following torch's threads": block(ours),
        f"ours, pinned to {cores} threads": block(ours, pin=True),
        "matmuls alone": block(lambda x, gain: x),
    }
    print(f"{args.layers} x (norm of {args.rows}x{args.hidden} f32, then mm by {args.hidden}x{args.hidden}); "
          f"torch {torch.__version__}, {cores} cores, rmsnorm target {rmsnorm.cpu_target()}; "
          f"median of {args.samples} samples, each the best of {args.repeat} blocks")
    with torch.inference_mode():
        for threads in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(threads)
            times = {name: [] for name in variants}
            for run in variants.values():
                run()  # warm up, and let the thread settings take effect
            for _ in range(args.samples):
                for name, run in variants.items():
                    best = float("inf")
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        run()
                        best = min(best, time.perf_counter() - t0)
                    times[name].append(best)
            base = statistics.median(times["matmuls alone"])
            print(f"\ntorch.set_num_threads({threads})")
            print(f"  {'block':36s} {'median':>10s} {'q1..q3':>21s} {'norms':>10s}")
            for name, samples in times.items():
                q = statistics.quantiles(samples, n=4)
                med = statistics.median(samples)
                norms = "" if name == "matmuls alone" else f"{(med - base) * 1e6:8.1f} us"
                print(f"  {name:36s} {med * 1e6:8.1f} us {q[0] * 1e6:9.1f}..{q[2] * 1e6:8.1f} us {norms:>10s}")
    rmsnorm.set_num_threads(0)


if __name__ == "__main__":
    main()
