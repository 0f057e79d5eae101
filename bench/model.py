#!/usr/bin/env python3
"""A Hugging Face Llama with our norms swapped in, against the original: tokens/s and the norm's share.

    pip install '.[bench]'   # or: make python, then .venv/bin/pip install 'transformers>=4.45'
    python bench/model.py                        # eager and torch.compile, inference and a training step
    python bench/model.py --no-compile --quick   # eager only, fewer repetitions: a smoke run

The model is transformers' LlamaForCausalLM built from a LlamaConfig with random weights (nothing is
downloaded): --layers, --hidden, --heads, --ffn, --vocab size it. Three variants of the same weights:

    original   transformers' LlamaRMSNorm (f32 upcast, six ops) and the residual adds as written
    ours       rmsnorm.torch.RMSNorm for input_layernorm and the final norm, and FusedAddRMSNorm for
               post_attention_layernorm with the residual add before it fused in (add_rms_norm)
    no norm    every norm replaced by the identity (the adds kept): the step without any norm

The norm's share of a step is 1 - time(no norm) / time(variant), so it counts whatever a norm costs
(its kernels, allocation, dispatch, autograd nodes) without instrumenting it. Timings: the median of
--reps calls, variants alternated call by call, after warm-up; tokens/s = batch * seq / time.
Training step = forward with labels, backward, SGD step.
"""
import argparse
import copy
import os
import platform
import statistics
import sys
import time
import types


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--ffn", type=int, default=2816, help="intermediate size of the MLP")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's default)")
    p.add_argument("--reps", type=int, default=9, help="timed calls per variant (median reported)")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--quick", action="store_true", help="3 repetitions, eager only")
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.no_compile = 3, True
    return args


def llama_variants(args, torch, rt):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.ffn,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.heads, max_position_embeddings=max(args.seq, 128),
                         rms_norm_eps=1e-6, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    original = LlamaForCausalLM(config).to(dtype)
    with torch.no_grad():  # gains away from 1, so that a norm that ignored its weight would show
        for m in original.modules():
            if isinstance(m, LlamaRMSNorm):
                m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape))

    def ours_norm(m, cls):
        norm = cls(m.weight.shape[0], eps=m.variance_epsilon, dtype=m.weight.dtype)
        norm.weight = m.weight
        return norm

    # The post-attention norm takes the attention output and the residual: the add happens in the norm.
    def fused_forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None,
                      **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                          position_ids=position_ids, position_embeddings=position_embeddings,
                                          **kwargs)
        hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)
        return residual + self.mlp(hidden_states)

    def no_norm_forward(self, hidden_states, attention_mask=None, position_ids=None, position_embeddings=None,
                        **kwargs):
        residual = hidden_states
        hidden_states, _ = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                          position_ids=position_ids, position_embeddings=position_embeddings,
                                          **kwargs)
        hidden_states = residual + hidden_states
        return hidden_states + self.mlp(hidden_states)

    ours = copy.deepcopy(original)
    for layer in ours.model.layers:
        assert isinstance(layer, LlamaDecoderLayer)
        layer.input_layernorm = ours_norm(layer.input_layernorm, rt.RMSNorm)
        layer.post_attention_layernorm = ours_norm(layer.post_attention_layernorm, rt.FusedAddRMSNorm)
        layer.forward = types.MethodType(fused_forward, layer)
    ours.model.norm = ours_norm(ours.model.norm, rt.RMSNorm)

    no_norm = copy.deepcopy(original)
    for layer in no_norm.model.layers:
        layer.forward = types.MethodType(no_norm_forward, layer)
    no_norm.model.norm = torch.nn.Identity()
    return {"original": original, "ours": ours, "no norm": no_norm}


def main(argv=None):
    args = parse_args(argv)
    import torch

    import rmsnorm
    import rmsnorm.torch as rt

    try:
        import transformers
    except ImportError:
        print("bench/model.py needs transformers: pip install 'transformers>=4.45' (the bench extra)")
        return 1
    if args.threads:
        torch.set_num_threads(args.threads)

    models = llama_variants(args, torch, rt)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
    tokens = args.batch * args.seq

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"bench/model.py: Llama {args.layers} layers, hidden {args.hidden}, {args.heads} heads, ffn {args.ffn}, "
          f"vocab {args.vocab}; batch {args.batch} x seq {args.seq} = {tokens} tokens; {args.dtype}")
    print(f"  machine {cpu}, {os.cpu_count()} CPUs, load average {load:.2f}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), transformers {transformers.__version__}, rmsnorm "
          f"{rmsnorm.__version__} ({rmsnorm.cpu_target()})")

    with torch.no_grad():
        ref = models["original"](ids).logits.float()
        got = models["ours"](ids).logits.float()
    print(f"  check: max |logits(ours) - logits(original)| = {float((got - ref).abs().max()):.2e} "
          f"(max |logits| {float(ref.abs().max()):.2f})")

    modes = ["eager"] + ([] if args.no_compile else ["compile"])
    for mode in modes:
        for kind in ("inference", "training"):
            calls = {}
            for name, model in models.items():
                model = copy.deepcopy(model) if kind == "training" else model  # SGD steps change weights
                calls[name] = make_call(torch, model, ids, kind, mode)
            t0 = time.perf_counter()
            for call in calls.values():
                call()
                call()  # warm-up (compiles on the first)
            warm = time.perf_counter() - t0
            times = {name: [] for name in calls}
            for _ in range(args.reps):
                for name, call in calls.items():
                    t = time.perf_counter()
                    call()
                    times[name].append(time.perf_counter() - t)
            print(f"\n{mode} {kind} (warm-up {warm:.1f} s)")
            print(f"  {'variant':10s} {'median':>10s} {'spread':>7s} {'tokens/s':>10s} {'norm share':>10s} "
                  f"{'vs original':>11s}")
            base = statistics.median(times["no norm"])
            orig = statistics.median(times["original"])
            for name, ts in times.items():
                m = statistics.median(ts)
                q = statistics.quantiles(ts, n=4) if len(ts) >= 2 else [m] * 3
                spread = (q[2] - q[0]) / 2 / m * 100
                share = "-" if name == "no norm" else f"{(1 - base / m) * 100:.1f}%"
                print(f"  {name:10s} {m * 1e3:8.2f}ms {spread:6.1f}% {tokens / m:10.0f} {share:>10s} "
                      f"{orig / m:10.2f}x")
            sys.stdout.flush()
    return 0


def make_call(torch, model, ids, kind, mode):
    if kind == "inference":
        model.eval()
        fn = torch.compile(model, fullgraph=False) if mode == "compile" else model

        def call():
            with torch.inference_mode():
                fn(ids)
        return call
    model.train()
    fn = torch.compile(model, fullgraph=False) if mode == "compile" else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def call():
        opt.zero_grad(set_to_none=True)
        fn(ids, labels=ids).loss.backward()
        opt.step()
    return call


if __name__ == "__main__":
    sys.exit(main())
