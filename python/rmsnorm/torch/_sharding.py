"""DTensor sharding rules for the custom ops (torch.distributed.tensor.experimental.register_sharding).

The ops work on (rows, cols) with the statistic taken along cols, so a DTensor sharded on rows (the
sequence-parallel layout once the leading dimensions are flattened) stays sharded: each rank normalizes
its own rows with the replicated weight and bias. The per-row statistics are sharded like the rows; the
parameter gradients are partial sums, reduced where a placement needs them whole. Sharding on cols (the
normalized dimension) is not one of the rules, so DTensor gathers the rows first there.

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

    R, S0 = Replicate(), Shard(0)

    def param(p):
        return None if p is None else R

    ops = torch.ops.rmsnorm

    @register_sharding(ops.rms_norm_fwd.default)
    def _(x, weight, bias, eps, partial, weight_offset):
        rest = [None, None, None]
        return [([R, R], [R, param(weight), param(bias)] + rest),
                ([S0, S0], [S0, param(weight), param(bias)] + rest)]

    @register_sharding(ops.rms_norm_bwd.default)
    def _(dy, x, weight, rstd, eps, partial, weight_offset, need_dweight, need_dbias):
        rest = [None] * 5
        return [([R, R, R], [R, R, param(weight), R] + rest),
                ([S0, Partial(), Partial()], [S0, S0, param(weight), S0] + rest)]

    @register_sharding(ops.add_rms_norm_fwd.default)
    def _(x, residual, weight, bias, eps, partial, weight_offset):
        rest = [None, None, None]
        return [([R, R, R], [R, R, param(weight), param(bias)] + rest),
                ([S0, S0, S0], [S0, S0, param(weight), param(bias)] + rest)]

    @register_sharding(ops.layer_norm_fwd.default)
    def _(x, weight, bias, eps):
        return [([R, R, R], [R, param(weight), param(bias), None]),
                ([S0, S0, S0], [S0, param(weight), param(bias), None])]

    @register_sharding(ops.layer_norm_bwd.default)
    def _(dy, x, weight, mean, rstd, eps, need_dweight, need_dbias):
        rest = [None] * 3
        return [([R, R, R], [R, R, param(weight), R, R] + rest),
                ([S0, Partial(), Partial()], [S0, S0, param(weight), S0, S0] + rest)]
