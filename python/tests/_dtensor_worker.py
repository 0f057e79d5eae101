"""Our ops on DTensors in one of two gloo processes, for test_dtensor.py (spawned, so importable by name).

Raises on a mismatch; the test sees the worker's exception.
"""
import os

import torch

import rmsnorm.torch as rt

import _gloo


def check(rank, mesh):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    g = torch.Generator().manual_seed(0)
    cols = 24
    # (sequence, hidden) on the sequence; (batch, sequence, hidden) on the batch and, sequence parallel, on
    # the sequence.
    for shape, dim in (((8, cols), 0), ((4, 3, cols), 0), ((3, 4, cols), 1)):
        x = torch.randn(shape, generator=g)
        r = torch.randn(shape, generator=g)
        w = torch.rand(cols, generator=g) + 0.5
        b = torch.randn(cols, generator=g)
        dy = torch.randn(shape, generator=g)
        dh = torch.randn(shape, generator=g)

        def dist_inputs():
            xd = distribute_tensor(x, mesh, [Shard(dim)]).requires_grad_()
            rd = distribute_tensor(r, mesh, [Shard(dim)]).requires_grad_()
            wd = distribute_tensor(w, mesh, [Replicate()]).requires_grad_()
            bd = distribute_tensor(b, mesh, [Replicate()]).requires_grad_()
            return xd, rd, wd, bd

        cases = {
            "rms_norm": lambda x, r, w, b: (rt.rms_norm(x, (cols,), w, 1e-5, partial=0.5),),
            "layer_norm": lambda x, r, w, b: (rt.layer_norm(x, (cols,), w, b, 1e-5),),
            "add_rms_norm": lambda x, r, w, b: rt.add_rms_norm(x, r, w, 1e-5),
        }
        for name, f in cases.items():
            xl, rl, wl, bl = (t.clone().requires_grad_() for t in (x, r, w, b))
            expect = f(xl, rl, wl, bl)
            xd, rd, wd, bd = dist_inputs()
            got = f(xd, rd, wd, bd)
            for e, o in zip(expect, got):
                # Stayed sharded: no gather happened.
                assert tuple(o.placements) == (Shard(dim),), (name, shape, o.placements)
                assert o.to_local().shape[dim] == shape[dim] // 2, (name, shape, o.to_local().shape)
                torch.testing.assert_close(o.full_tensor(), e, rtol=0, atol=0)
            grads = (dy, dh)[:len(expect)]
            sum((e * d).sum() for e, d in zip(expect, grads)).backward()
            sum((o * distribute_tensor(d, mesh, [Shard(dim)])).sum() for o, d in zip(got, grads)).backward()
            for which, (local, distributed) in enumerate(zip((xl, rl, wl, bl), (xd, rd, wd, bd))):
                if local.grad is None:
                    assert distributed.grad is None, (name, which)
                    continue
                torch.testing.assert_close(distributed.grad.full_tensor(), local.grad, rtol=1e-5, atol=1e-5)


def check_and_mark(rank, world, out_dir):
    from torch.distributed.device_mesh import init_device_mesh

    check(rank, init_device_mesh("cpu", (world,)))
    open(os.path.join(out_dir, f"ok{rank}"), "w").close()


def run(rank, world, port, out_dir):
    _gloo.run_in_group(rank, world, port, check_and_mark, rank, world, out_dir)
