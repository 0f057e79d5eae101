"""DTensor sharding rules for the custom ops (torch.distributed.tensor.experimental.register_sharding).

The differentiable ops take (*, cols) with the statistic taken along cols, so a DTensor sharded on any
leading dimension stays sharded: Shard(0) of (seq, hidden), Shard(0) or Shard(1) (sequence parallel) of
(batch, seq, hidden). Each rank normalizes its own rows with the replicated weight and bias. The
statistics, of shape (*), are sharded like the rows; the parameter gradients are partial sums, reduced
where a placement needs them whole. Sharding on cols (the normalized dimension) is not one of the
rules, so DTensor gathers the rows first there.

Registered on first need rather than at import: importing torch.distributed.tensor costs a noticeable
part of a second, which users without DTensor should not pay. functional.py calls ensure_registered()
on its general path, which every DTensor takes (the eager shortcut takes plain tensors only).
"""
import sys

import torch

from . import _ops

_registered = [False]


def ensure_registered():
    if _registered[0] or "torch.distributed.tensor" not in sys.modules or torch.compiler.is_compiling():
        return
    _registered[0] = True
    _register()


def _register():
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor.experimental import register_sharding

    R = Replicate()

    def param(p):
        return None if p is None else R

    def leading(x):
        return [Shard(d) for d in range(x.ndim - 1)]

    ops = torch.ops.rmsnorm

    @register_sharding(ops.rms_norm_fwd.default)
    def _(x, weight, bias, eps, partial, weight_offset):
        rest = [None, None, None]
        return [([R, R], [R, param(weight), param(bias)] + rest)] + [
            ([S, S], [S, param(weight), param(bias)] + rest) for S in leading(x)]

    @register_sharding(ops.rms_norm_bwd.default)
    def _(dy, x, weight, rstd, eps, partial, weight_offset, need_dweight, need_dbias):
        rest = [None] * 5
        return [([R, R, R], [R, R, param(weight), R] + rest)] + [
            ([S, Partial(), Partial()], [S, S, param(weight), S] + rest) for S in leading(x)]

    @register_sharding(ops.add_rms_norm_fwd.default)
    def _(x, residual, weight, bias, eps, partial, weight_offset):
        rest = [None, None, None]
        return [([R, R, R], [R, R, param(weight), param(bias)] + rest)] + [
            ([S, S, S], [S, S, param(weight), param(bias)] + rest) for S in leading(x)]

    @register_sharding(ops.layer_norm_fwd.default)
    def _(x, weight, bias, eps):
        return [([R, R, R], [R, param(weight), param(bias), None])] + [
            ([S, S, S], [S, param(weight), param(bias), None]) for S in leading(x)]

    @register_sharding(ops.layer_norm_bwd.default)
    def _(dy, x, weight, mean, rstd, eps, need_dweight, need_dbias):
        rest = [None] * 3
        return [([R, R, R], [R, R, param(weight), R, R] + rest)] + [
            ([S, Partial(), Partial()], [S, S, param(weight), S, S] + rest) for S in leading(x)]
