#!/usr/bin/env python3
"""Our kernels side by side with PyTorch and ONNX Runtime: same process, same arrays, same threads.

    python bench/peers.py                      # the full table and out/peers.png
    python bench/peers.py --quick              # fewer samples, no torch.compile: a smoke run
    python bench/peers.py --shapes 4096x4096 --dtypes f32 --threads 1
    python bench/peers.py --alloc default       # torch's outputs on fresh pages, as out of the box
    python bench/peers.py --sweep --onednn-json out/sweep-onednn.json   # GB/s against row length: out/sweep.png

For each shape (a decode row, 16 rows, 4096 x 4096, 8192 x 4096) and dtype (f32, bf16) it times, forward and
forward+backward:

    rmsnorm.torch.rms_norm     ours, through the PyTorch drop-in a user calls
    F.rms_norm                 torch eager
    torch.compile(F.rms_norm)  Inductor's generated C++ (fullgraph, static shapes)
    F.layer_norm               torch's fused LayerNorm kernel: the strong eager baseline
    rmsnorm.torch.layer_norm   our LayerNorm
    ORT SimplifiedLayerNorm    ONNX Runtime's RMSNorm contrib op (forward only, no bf16 kernel)
    rmsnorm.rms_norm(out=)     ours from NumPy into a preallocated output: the kernel without allocation
    copy (memory bound)        x copied into a preallocated y: what moving the bytes costs

Every peer's output is first checked against ours. Samples are taken round-robin over the peers, so a
change in machine load affects all of them alike; the table gives the median time per call, the
interquartile spread, the effective bandwidth, and each peer's time divided by ours (> 1: ours faster).
The targets of the issue are evaluated at 4096 x 4096 f32 at the end.

Allocation (--alloc). Every torch op returns fresh memory, and glibc serves a block above 32 MiB (a
4096 x 4096 f32 output is 64 MiB) with new pages from the kernel, which zeroes them: one more write pass
over the output, paid by every torch-based peer alike, and more than the kernel itself where page faults
are slow (VMs). ONNX Runtime does not pay it: its arena reuses memory. So that the table compares
kernels rather than page zeroing, the default, --alloc cached, restarts this script with glibc told to
keep freed memory for reuse (MALLOC_MMAP_MAX_=0, MALLOC_TRIM_THRESHOLD_ large), much as the jemalloc or
tcmalloc that CPU tuning guides for PyTorch recommend would. --alloc default measures the allocator as
it comes; --alloc thp sets THP_MEM_ALLOC_ENABLE=1 (torch backs large tensors with huge pages). The
header reports what allocating and filling one fresh output costs under the mode in use.

The sweep (--sweep, run with oneDNN by `make sweep`). The forward only, over row lengths of 64 to 16384
columns (--sweep-cols), f32 and bf16, every call the same size: rows = --sweep-elements / cols, 2^22
elements by default (16 MiB per f32 tensor, 8 MiB in bf16), so that every point moves the same bytes
and only the row length changes, and those bytes go past every L2 and a core's share of most L3s (at
16384 columns there are still 256 rows to split between threads). Timed round-robin as above:

    rmsnorm.rms_norm(out=)   ours, from NumPy into a preallocated output: the kernel without allocation
    F.rms_norm               torch eager (its output is allocated per call, as torch always does)
    ORT                      ONNX Runtime's SimplifiedLayerNormalization (f32 only: no bf16 CPU kernel)
    copy x->y                the same bytes copied into a preallocated y (torch's copy_), drawn dashed

oneDNN runs in a C++ program of its own (bench/peers_onednn.cc, against its own venv); its --sweep
writes JSON which --onednn-json merges in as one more line, with the ratio to ours taken in its run.
The table, the JSON (--json, default out/sweep.json) and a chart of GB/s against columns, one panel per
dtype (--png, default out/sweep.png).
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

GB = 1e9


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="1x4096,16x4096,4096x4096,8192x4096", help="comma-separated ROWSxCOLS")
    p.add_argument("--dtypes", default="f32,bf16", help="comma-separated: f32, bf16, f16")
    p.add_argument("--threads", type=int, default=available_cpus(), help="threads for every peer (default: all "
                   "the CPUs this process may use, as oneDNN's TBB takes)")
    p.add_argument("--samples", type=int, default=15, help="timed samples per peer (median reported)")
    p.add_argument("--min-sample-ms", type=float, default=20.0, help="calls are repeated to fill a sample")
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--directions", default="fwd,fwd+bwd", help="fwd, fwd+bwd or both")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves its compile time)")
    p.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime")
    p.add_argument("--alloc", choices=("cached", "default", "thp"), default="cached",
                   help="how outputs are allocated (see above); default: cached")
    p.add_argument("--quick", action="store_true", help="5 samples, 5 ms, no torch.compile")
    p.add_argument("--png", help="chart to write ('' for none; default out/peers.png, out/sweep.png with --sweep)")
    p.add_argument("--json", help="raw results to write ('' for none; default out/peers.json, out/sweep.json)")
    p.add_argument("--sweep", action="store_true", help="forward GB/s against row length (see above)")
    p.add_argument("--sweep-cols", default=",".join(str(64 << i) for i in range(9)),
                   help="comma-separated row lengths for --sweep (default 64,128,...,16384)")
    p.add_argument("--sweep-elements", type=int, default=1 << 22,
                   help="elements per call in --sweep, rows = elements / cols (default 2^22)")
    p.add_argument("--onednn-json", default="", help="bench/peers_onednn --sweep --json output: oneDNN's line")
    args = p.parse_args(argv)
    mode = "sweep" if args.sweep else "peers"
    args.png = f"out/{mode}.png" if args.png is None else args.png
    args.json = f"out/{mode}.json" if args.json is None else args.json
    if args.quick or args.sweep:  # the sweep has no torch.compile line
        args.no_compile = True
    if args.quick:
        args.samples, args.min_sample_ms = 5, 5.0
    if args.threads < 1:
        p.error("--threads must be >= 1")
    try:
        args.sweep_cols = [int(c) for c in args.sweep_cols.split(",") if c]
    except ValueError:
        p.error(f"--sweep-cols: want comma-separated integers, got {args.sweep_cols}")
    if min(args.sweep_cols, default=0) < 1 or args.sweep_elements < 1:
        p.error("--sweep-cols and --sweep-elements: want positive integers")
    args.shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
    for s in args.shapes:
        if len(s) != 2 or min(s) < 1:
            p.error(f"--shapes: want ROWSxCOLS, got {s}")
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    for d in args.dtypes:
        if d not in ("f32", "bf16", "f16"):
            p.error(f"--dtypes: unknown {d}")
    args.directions = [d for d in args.directions.split(",") if d]
    for d in args.directions:
        if d not in ("fwd", "fwd+bwd"):
            p.error(f"--directions: unknown {d}")
    return args


def main(argv=None):
    args = parse_args(argv)
    setup_allocator(args.alloc, argv)

    import numpy as np
    import torch
    import torch.nn.functional as F

    import rmsnorm
    import rmsnorm.torch as rt

    torch.set_num_threads(args.threads)
    rmsnorm.set_num_threads(args.threads)
    torch.manual_seed(0)
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

    ort, ort_why = None, ""
    if not args.no_ort:
        try:
            import onnx  # noqa: F401
            import onnxruntime as ort
        except ImportError as e:
            ort_why = f"not installed ({e.name})"
    else:
        ort_why = "--no-ort"

    print_header(args, torch, rmsnorm, ort, ort_why)

    if args.sweep:
        results = run_sweep(args, dtypes, torch, F, np, rmsnorm, rt, ort, ort_why)
        write_outputs(args, {"sweep": dict(elements=args.sweep_elements, threads=args.threads,
                                           onednn_json=args.onednn_json or None), "results": results},
                      lambda: plot_sweep(results, args.png, args))
        return 0

    results = []
    for rows, cols in args.shapes:
        for dname in args.dtypes:
            dtype = dtypes[dname]
            case = Case(rows, cols, dname, dtype, args, torch, F, np, rmsnorm, rt, ort, ort_why)
            for direction in args.directions:
                peers = case.peers(direction)
                timings = time_round_robin(peers, args.samples, args.min_sample_ms / 1e3)
                for peer, ts in zip(peers, timings):
                    results.append(case.record(direction, peer, ts))
                print_group(results, rows, cols, dname, direction)
            case.release()

    summary = evaluate_targets(results) + evaluate_call_overhead(results)
    write_outputs(args, {"results": results, "targets": summary}, lambda: plot(results, args.png))
    return 0


def write_outputs(args, document, draw):
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(document, f, indent=1)
        print(f"wrote {args.json}")
    if args.png:
        try:
            draw()
            print(f"wrote {args.png}")
        except ImportError:
            print("matplotlib is not installed: no chart (pip install matplotlib)")


def available_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# glibc reads its tunables once, at start-up: the cached mode re-executes this script with them set.
_CACHED_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40), "MALLOC_TOP_PAD_": str(1 << 28)}


def setup_allocator(mode, argv):
    if mode == "thp":
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # read by torch, so before its import
    elif mode == "cached" and platform.system() == "Linux" and os.environ.get("RMSNORM_PEERS_ALLOC") != "cached":
        env = dict(os.environ, RMSNORM_PEERS_ALLOC="cached", **_CACHED_ENV)
        sys.stdout.flush()
        script = [sys.executable, os.path.abspath(__file__)] + list(sys.argv[1:] if argv is None else argv)
        os.execve(sys.executable, script, env)


def allocator_description(mode):
    if mode == "cached":
        if os.environ.get("RMSNORM_PEERS_ALLOC") == "cached":
            return "cached (" + " ".join(f"{k}={v}" for k, v in _CACHED_ENV.items()) + ")"
        return "default (cached mode needs glibc on Linux)"
    if mode == "thp":
        return f"thp (THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE')})"
    return "default (the C library's malloc as it comes)"


# ---- The peers ----------------------------------------------------------------------------------


class Peer:
    def __init__(self, name, fn=None, why="", kind="peer"):
        self.name, self.fn, self.why, self.kind = name, fn, why, kind  # why: the reason fn is None
        self.check = None  # max |difference| from ours, on the forward output


class Case:
    """The arrays of one (shape, dtype), shared by every peer, and the callables that time each peer."""

    def __init__(self, rows, cols, dname, dtype, args, torch, F, np, rmsnorm, rt, ort, ort_why):
        self.rows, self.cols, self.dname, self.dtype, self.args = rows, cols, dname, dtype, args
        self.torch, self.F, self.np, self.rmsnorm, self.rt = torch, F, np, rmsnorm, rt
        self.ort, self.ort_why = ort, ort_why
        self.x = torch.randn(rows, cols, dtype=torch.float32).to(dtype)
        # A model after .to(dtype) holds its gains in that dtype too.
        self.w = (1 + 0.1 * torch.randn(cols)).to(dtype)
        self.b = (0.1 * torch.randn(cols)).to(dtype)
        self.dy = torch.randn(rows, cols, dtype=torch.float32).to(dtype)
        self.eps = args.eps
        with torch.no_grad():
            self.ref = rt.rms_norm(self.x, (cols,), self.w, self.eps).float()
            self.ref_ln = rt.layer_norm(self.x, (cols,), self.w, self.b, 1e-5).float()
        self.elem = self.x.element_size()

    def release(self):
        self.torch._dynamo.reset()

    def _diff(self, y, ref):
        return float((y.float() - ref).abs().max())

    def peers(self, direction):
        torch, F, rt, cols, eps = self.torch, self.F, self.rt, self.cols, self.eps
        x, w, b, dy = self.x, self.w, self.b, self.dy
        shape = (cols,)
        fwd = direction == "fwd"
        out = []
        bl = b.detach().requires_grad_(not fwd)  # LayerNorm's bias

        def forward(name, f, ref, kind="peer"):
            if fwd:
                def call():
                    with torch.no_grad():
                        return f(x, w)
            else:
                xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()

                def call():
                    f(xg, wg).backward(dy)
                    # A fresh gradient each time, as after optimizer.zero_grad(): no accumulation pass.
                    xg.grad = wg.grad = bl.grad = None
            peer = Peer(name, call, kind=kind)
            with torch.no_grad():
                peer.check = self._diff(f(x, w), ref)
            out.append(peer)

        forward("rmsnorm.torch.rms_norm", lambda x, w: rt.rms_norm(x, shape, w, eps), self.ref, "ours")
        forward("F.rms_norm (eager)", lambda x, w: F.rms_norm(x, shape, w, eps), self.ref)
        if self.args.no_compile:
            out.append(Peer("torch.compile(F.rms_norm)", why="--no-compile"))
        else:
            torch._dynamo.reset()
            compiled = torch.compile(lambda x, w: F.rms_norm(x, shape, w, eps), fullgraph=True, dynamic=False)
            t0 = time.perf_counter()
            if fwd:
                with torch.no_grad():
                    compiled(x, w)
            else:
                compiled(x.detach().requires_grad_(), w.detach().requires_grad_()).backward(dy)
            print(f"  (torch.compile {direction} {self.rows}x{cols} {self.dname}: {time.perf_counter() - t0:.1f} s)")
            forward("torch.compile(F.rms_norm)", compiled, self.ref)
        forward("F.layer_norm (torch fused)", lambda x, w: F.layer_norm(x, shape, w, bl, 1e-5), self.ref_ln)
        forward("rmsnorm.torch.layer_norm", lambda x, w: rt.layer_norm(x, shape, w, bl, 1e-5), self.ref_ln, "ours")
        if fwd:
            out.append(self._ort_peer())
            out.append(self._numpy_peer())
            out.append(self._copy_peer())
        return out

    def _ort_peer(self):
        name = "ORT SimplifiedLayerNorm"
        if self.ort is None:
            return Peer(name, why=self.ort_why)
        if self.dtype != self.torch.float32:
            return Peer(name, why=f"no {self.dname} CPU kernel")
        from onnx import TensorProto, helper, numpy_helper

        np, cols = self.np, self.cols
        xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", cols])
        ys = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", cols])
        node = helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=self.eps)
        graph = helper.make_graph([node], "rms", [xs], [ys], [numpy_helper.from_array(self.w.numpy(), "scale")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8  # one every ONNX Runtime of recent years reads
        so = self.ort.SessionOptions()
        so.intra_op_num_threads = self.args.threads
        so.inter_op_num_threads = 1
        # Spinning pool threads would steal the cores from the peer timed next.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = self.ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        xn = self.x.numpy()
        peer = Peer(name, lambda: sess.run(None, {"x": xn}))
        peer.check = self._diff(self.torch.from_numpy(sess.run(None, {"x": xn})[0]), self.ref)
        return peer

    def _numpy_peer(self):
        name = "rmsnorm.rms_norm(out=) NumPy"
        np, rmsnorm = self.np, self.rmsnorm
        if self.dtype == self.torch.bfloat16:
            try:
                import ml_dtypes
            except ImportError:
                return Peer(name, why="ml_dtypes not installed", kind="ours")
            xn = self.x.view(self.torch.int16).numpy().view(ml_dtypes.bfloat16)
        else:
            xn = self.x.numpy()
        wn = self.w.float().numpy()
        yn = np.empty_like(xn)
        peer = Peer(name, lambda: rmsnorm.rms_norm(xn, wn, self.eps, out=yn), kind="ours")
        rmsnorm.rms_norm(xn, wn, self.eps, out=yn)
        peer.check = self._diff(self.torch.from_numpy(yn.astype(np.float32)), self.ref)
        return peer

    def _copy_peer(self):
        y = self.torch.empty_like(self.x)
        x = self.x
        return Peer("copy x->y (memory bound)", lambda: y.copy_(x), kind="bound")

    def bytes_moved(self, direction):
        # Compulsory traffic: forward reads x, writes y; backward also reads dy and x, writes dx.
        n = self.rows * self.cols * self.elem
        return 2 * n if direction == "fwd" else 5 * n

    def record(self, direction, peer, ts):
        r = dict(direction=direction, rows=self.rows, cols=self.cols, dtype=self.dname, peer=peer.name,
                 kind=peer.kind, why=peer.why, check=peer.check, bytes=self.bytes_moved(direction))
        if ts:
            q = statistics.quantiles(ts, n=4) if len(ts) >= 2 else [ts[0]] * 3
            r.update(median_s=statistics.median(ts), q1_s=q[0], q3_s=q[2], samples=len(ts))
        return r


# ---- Timing -------------------------------------------------------------------------------------


def time_round_robin(peers, samples, min_sample_s):
    """Per peer, `samples` seconds-per-call figures, each from enough back-to-back calls to fill min_sample_s."""
    live = [p for p in peers if p.fn is not None]
    reps = {}
    for p in live:
        p.fn()  # warm: first-call costs (page faults, lazy initialization) stay out of the samples
        n, t = 1, 0.0
        while True:
            t0 = time.perf_counter()
            for _ in range(n):
                p.fn()
            t = time.perf_counter() - t0
            if t >= min_sample_s or n >= 1 << 16:
                break
            n = min(n * max(2, int(min_sample_s / max(t, 1e-9))), 1 << 16)
        reps[p.name] = n
    times = {p.name: [] for p in live}
    for _ in range(samples):
        for p in live:
            n = reps[p.name]
            t0 = time.perf_counter()
            for _ in range(n):
                p.fn()
            times[p.name].append((time.perf_counter() - t0) / n)
    return [times.get(p.name, []) for p in peers]


# ---- Reporting ----------------------------------------------------------------------------------


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e3:.2f} ms"


def print_header(args, torch, rmsnorm, ort, ort_why):
    import numpy as np

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    print("rmsnorm peers: time per call, median of round-robin samples; ratio = peer time / our time")
    print(f"  machine  {cpu}, {os.cpu_count()} logical CPUs, load average {load[0]:.2f} at start")
    print(f"  threads  {args.threads} for every peer (rmsnorm {rmsnorm.get_num_threads()}, torch "
          f"{torch.get_num_threads()}, ORT intra-op {args.threads})")
    print(f"  versions rmsnorm {rmsnorm.__version__} ({rmsnorm.cpu_target()}, backend {rmsnorm.get_backend()}), "
          f"torch {torch.__version__}, numpy {np.__version__}, "
          f"onnxruntime {ort.__version__ if ort else 'n/a: ' + ort_why}")
    x = torch.empty(4096, 4096)
    t0 = time.perf_counter()
    for _ in range(3):
        torch.empty(4096, 4096).fill_(1.0)
    fresh = (time.perf_counter() - t0) / 3
    t0 = time.perf_counter()
    for _ in range(3):
        x.fill_(1.0)
    reused = (time.perf_counter() - t0) / 3
    print(f"  alloc    {allocator_description(args.alloc)}")
    print(f"           filling a new 4096x4096 f32 tensor takes {fmt_time(fresh)}, refilling one {fmt_time(reused)}")
    print(f"  samples  {args.samples} per peer, each >= {args.min_sample_ms:g} ms of back-to-back calls; "
          f"eps {args.eps:g} (LayerNorm 1e-5)")


def print_group(results, rows, cols, dname, direction):
    group = [r for r in results if (r["rows"], r["cols"], r["dtype"], r["direction"]) == (rows, cols, dname, direction)]
    ours = next((r for r in group if r["peer"] == "rmsnorm.torch.rms_norm" and "median_s" in r), None)
    print(f"\n{direction:8s} {rows} x {cols} {dname}")
    print(f"  {'peer':32s} {'median':>10s} {'spread':>7s} {'GB/s':>7s} {'ratio':>7s} {'max|diff|':>10s}")
    for r in group:
        if "median_s" not in r:
            print(f"  {r['peer']:32s} {'n/a':>10s}  ({r['why']})")
            continue
        m = r["median_s"]
        spread = (r["q3_s"] - r["q1_s"]) / 2 / m * 100
        ratio = f"{m / ours['median_s']:.2f}x" if ours else "-"
        check = f"{r['check']:.2e}" if r["check"] is not None else "-"
        print(f"  {r['peer']:32s} {fmt_time(m):>10s} {spread:6.1f}% {r['bytes'] / m / GB:7.2f} {ratio:>7s} {check:>10s}")
    sys.stdout.flush()


TARGETS = [
    # (direction, peer, minimum ratio peer/ours, text)
    ("fwd", "F.rms_norm (eager)", 3.0, "forward vs F.rms_norm eager >= 3x"),
    ("fwd+bwd", "F.rms_norm (eager)", 4.0, "forward+backward vs F.rms_norm eager >= 4x"),
    ("fwd", "torch.compile(F.rms_norm)", 1.2, "forward vs torch.compile(F.rms_norm) >= 1.2x"),
    ("fwd", "ORT SimplifiedLayerNorm", 1.2, "forward vs ONNX Runtime >= 1.2x"),
    ("fwd", "F.layer_norm (torch fused)", 1.0, "forward: our RMSNorm faster than torch's fused F.layer_norm"),
    ("fwd+bwd", "F.layer_norm (torch fused)", 1.0, "forward+backward: our RMSNorm faster than F.layer_norm"),
]


def evaluate_targets(results, rows=4096, cols=4096, dtype="f32"):
    print(f"\ntargets at {rows} x {cols} {dtype} (ratio = peer median / our median; '>' needs ratio above):")
    summary = []

    def find(direction, peer):
        return next((r for r in results if (r["rows"], r["cols"], r["dtype"], r["direction"], r["peer"]) ==
                     (rows, cols, dtype, direction, peer)), None)

    for direction, peer, need, text in TARGETS:
        ours, other = find(direction, "rmsnorm.torch.rms_norm"), find(direction, peer)
        if not ours or not other or "median_s" not in ours or "median_s" not in other:
            why = (other or {}).get("why") or "not measured in this run"
            print(f"  [ n/a  ] {text}: {why}")
            summary.append(dict(target=text, status="n/a", why=why))
            continue
        ratio = other["median_s"] / ours["median_s"]
        met = ratio >= need if need > 1.0 else ratio > need
        # The same ratio taken from the quartiles says whether the verdict could flip with the noise.
        lo = other["q1_s"] / ours["q3_s"]
        hi = other["q3_s"] / ours["q1_s"]
        firm = (lo >= need) if met else (hi < need)
        status = ("MET" if met else "MISSED") + ("" if firm else " (within noise)")
        print(f"  [{status:^6s}] {text}: {ratio:.2f}x (quartile range {lo:.2f}x .. {hi:.2f}x)")
        summary.append(dict(target=text, status=status, ratio=ratio, ratio_lo=lo, ratio_hi=hi))
    return summary


# Issue 17: on the small shapes a call is mostly overhead, and ours must cost no more than F.layer_norm's.
OVERHEAD_SHAPES = ((1, 4096), (16, 4096))


def evaluate_call_overhead(results, dtype="f32"):
    print(f"\ncall overhead, small shapes {dtype} (ratio = F.layer_norm median / our rms_norm median; "
          f"target >= 1.00):")
    summary = []
    for rows, cols in OVERHEAD_SHAPES:
        for direction in ("fwd", "fwd+bwd"):
            def find(peer):
                return next((r for r in results if (r["rows"], r["cols"], r["dtype"], r["direction"], r["peer"]) ==
                             (rows, cols, dtype, direction, peer) and "median_s" in r), None)

            ours, ln = find("rmsnorm.torch.rms_norm"), find("F.layer_norm (torch fused)")
            text = f"{direction} {rows}x{cols}: ours {fmt_time(ours and ours['median_s'])}, " \
                   f"F.layer_norm {fmt_time(ln and ln['median_s'])}"
            if not ours or not ln:
                print(f"  [ n/a  ] {text}: not measured in this run")
                summary.append(dict(target=f"overhead {direction} {rows}x{cols}", status="n/a"))
                continue
            ratio = ln["median_s"] / ours["median_s"]
            lo, hi = ln["q1_s"] / ours["q3_s"], ln["q3_s"] / ours["q1_s"]
            met = ratio >= 1.0
            firm = lo >= 1.0 if met else hi < 1.0
            status = ("MET" if met else "MISSED") + ("" if firm else " (within noise)")
            print(f"  [{status:^6s}] {text}: {ratio:.2f}x (quartile range {lo:.2f}x .. {hi:.2f}x)")
            summary.append(dict(target=f"overhead {direction} {rows}x{cols}", status=status, ratio=ratio,
                                ratio_lo=lo, ratio_hi=hi))
    return summary


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directions = [d for d in ("fwd", "fwd+bwd") if any(r["direction"] == d for r in results)]
    fig, axes = plt.subplots(len(directions), 1, figsize=(13, 4.8 * len(directions)), squeeze=False)
    for ax, direction in zip(axes[:, 0], directions):
        rs = [r for r in results if r["direction"] == direction]
        groups = list(dict.fromkeys((r["rows"], r["cols"], r["dtype"]) for r in rs))
        peers = list(dict.fromkeys(r["peer"] for r in rs))
        width = 0.8 / len(peers)
        colors = plt.get_cmap("tab10")
        for i, peer in enumerate(peers):
            xs, ys = [], []
            for g, key in enumerate(groups):
                r = next((r for r in rs if (r["rows"], r["cols"], r["dtype"]) == key and r["peer"] == peer), None)
                if r and "median_s" in r:
                    xs.append(g + (i - (len(peers) - 1) / 2) * width)
                    ys.append(r["bytes"] / r["median_s"] / GB)
            kind = next(r["kind"] for r in rs if r["peer"] == peer)
            bars = ax.bar(xs, ys, width, label=peer, color=colors(i % 10), edgecolor="black",
                          linewidth=1.6 if kind == "ours" else 0.0, hatch="//" if kind == "bound" else None)
            for bar, y in zip(bars, ys):
                ax.annotate(f"{y:.1f}", (bar.get_x() + bar.get_width() / 2, y), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{r} x {c} {d}" for r, c, d in groups])
        ax.set_yscale("log")
        ax.set_ylabel("effective GB/s (compulsory bytes / time)")
        ax.set_title(f"{direction}: higher is better; outlined bars are ours")
        ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
        ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=120)


# ---- The sweep: forward GB/s against row length ------------------------------------------------

ONEDNN_PEER = "oneDNN (bench/peers_onednn)"
# The sweep's lines: Case.peers' name -> (table heading, legend). The table's other peers (torch.compile,
# the LayerNorms, our torch route) stay out of the chart.
SWEEP_LINES = {
    "rmsnorm.rms_norm(out=) NumPy": ("ours", "ours: rmsnorm.rms_norm(out=), no allocation"),
    "F.rms_norm (eager)": ("torch", "torch: F.rms_norm eager"),
    "ORT SimplifiedLayerNorm": ("ORT", "ONNX Runtime: SimplifiedLayerNormalization"),
    ONEDNN_PEER: ("oneDNN", "oneDNN: rms_norm layer normalization (own run)"),
    "copy x->y (memory bound)": ("copy", "copy of the same bytes (torch copy_)"),
}


def run_sweep(args, dtypes, torch, F, np, rmsnorm, rt, ort, ort_why):
    onednn = load_onednn_sweep(args.onednn_json, args.threads)
    results = []
    for dname in args.dtypes:
        for cols in args.sweep_cols:
            rows = max(1, args.sweep_elements // cols)
            case = Case(rows, cols, dname, dtypes[dname], args, torch, F, np, rmsnorm, rt, ort, ort_why)
            peers = [p for p in case.peers("fwd") if p.name in SWEEP_LINES]
            timings = time_round_robin(peers, args.samples, args.min_sample_ms / 1e3)
            results += [case.record("fwd", peer, ts) for peer, ts in zip(peers, timings)]
            results.append(onednn_record(onednn, case))
            case.release()
        print_sweep(results, dname, args)
    return results


def load_onednn_sweep(path, threads):
    """peers_onednn --sweep's points by (dtype, rows, cols), or the reason there are none."""
    if not path:
        return "no --onednn-json (make sweep runs bench/peers_onednn --sweep for it)"
    with open(path) as f:
        doc = json.load(f)
    if doc.get("mode") != "sweep":
        sys.exit(f"--onednn-json {path}: not the output of peers_onednn --sweep")
    if doc["ours_threads"] != threads:
        print(f"  note: {path} ran on {doc['ours_threads']} threads, this run on {threads}")
    print(f"  oneDNN   {doc['onednn_version']} from {path} ({doc['elements']} elements per call, "
          f"{doc['reps']} repetitions; threads: {doc['onednn_threads']})")
    return {(p["dtype"], p["rows"], p["cols"]): p for p in doc["points"]}


def onednn_record(onednn, case):
    """oneDNN's point as a record like the timed peers'; ours_in_run_s is our time in the same process."""
    r = dict(direction="fwd", rows=case.rows, cols=case.cols, dtype=case.dname, peer=ONEDNN_PEER, kind="peer",
             why="", check=None, bytes=case.bytes_moved("fwd"))
    if isinstance(onednn, str):
        r["why"] = onednn
        return r
    point = onednn.get((case.dname, case.rows, case.cols))
    if point is None:
        r["why"] = "not in --onednn-json (other elements or columns?)"
    elif "skipped" in point:
        r["why"] = point["skipped"]
    else:
        r.update(check=point["y_diff"], median_s=point["onednn_median_s"], ours_in_run_s=point["ours_median_s"])
    return r


def print_sweep(results, dname, args):
    rs = [r for r in results if r["dtype"] == dname]
    peers = [p for p in SWEEP_LINES if any(r["peer"] == p for r in rs)]
    print(f"\nfwd {dname}, {args.sweep_elements} elements per call: GB/s (compulsory bytes / median time)")
    print(f"  {'cols':>6s} {'rows':>7s} " + " ".join(f"{SWEEP_LINES[p][0]:>7s}" for p in peers) +
          "  oneDNN/ours in oneDNN's run")
    missing = {}
    for cols in dict.fromkeys(r["cols"] for r in rs):
        row = {r["peer"]: r for r in rs if r["cols"] == cols}
        cells = []
        for p in peers:
            r = row[p]
            if "median_s" in r:
                cells.append(f"{r['bytes'] / r['median_s'] / GB:7.2f}")
            else:
                cells.append(f"{'n/a':>7s}")
                missing.setdefault(p, r["why"])
        o = row[ONEDNN_PEER]
        ratio = f"{o['median_s'] / o['ours_in_run_s']:.2f}x" if "median_s" in o else "-"
        print(f"  {cols:6d} {row[peers[0]]['rows']:7d} " + " ".join(cells) + f"  {ratio:>8s}")
    for p, why in missing.items():
        print(f"  n/a {SWEEP_LINES[p][0]}: {why}")
    sys.stdout.flush()


def plot_sweep(results, path, args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dnames = list(dict.fromkeys(r["dtype"] for r in results))
    fig, axes = plt.subplots(1, len(dnames), figsize=(6.5 * len(dnames), 4.8), squeeze=False, sharey=True)
    colors = plt.get_cmap("tab10")
    for ax, dname in zip(axes[0], dnames):
        for i, (peer, (_, label)) in enumerate(SWEEP_LINES.items()):
            points = [r for r in results if r["dtype"] == dname and r["peer"] == peer and "median_s" in r]
            if not points:
                continue
            kind = points[0]["kind"]
            ax.plot([r["cols"] for r in points], [r["bytes"] / r["median_s"] / GB for r in points], label=label,
                    color="black" if kind == "bound" else colors(i), linestyle="--" if kind == "bound" else "-",
                    linewidth=2.4 if kind == "ours" else 1.4, marker=None if kind == "bound" else "o", markersize=4)
        ax.set_xscale("log", base=2)
        ax.set_xticks(args.sweep_cols)
        ax.set_xticklabels([str(c) for c in args.sweep_cols], fontsize=8)
        ax.set_xlabel("columns (row length)")
        ax.set_title(f"RMSNorm forward, {dname}")
        ax.grid(which="both", alpha=0.3)
    axes[0][0].set_ylabel("GB/s (x read + y written) / time")
    axes[0][0].set_ylim(bottom=0)
    # One legend for both panels, since a line may be missing from one of them (ORT has no bf16).
    lines = {}
    for ax in axes[0]:
        lines.update(zip(*reversed(ax.get_legend_handles_labels())))
    fig.legend(lines.values(), lines.keys(), fontsize=8, ncol=3, loc="lower center")
    fig.suptitle(f"{args.sweep_elements} elements per call (rows = elements / columns), {args.threads} threads; "
                 f"higher is better", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
