"""RMSNorm and LayerNorm modules that are torch.nn.RMSNorm and torch.nn.LayerNorm with our kernels.

They subclass torch's modules: same constructor arguments, parameter names, state_dict keys and
isinstance() answers, so checkpoints load both ways and code that looks for torch's norms finds ours.
"""
from typing import Optional

import torch
from torch import nn

from .._checks import check_eps, check_offset, check_partial
from . import functional as F


class RMSNorm(nn.RMSNorm):
    """torch.nn.RMSNorm running the rmsnorm kernels, plus pRMSNorm, a gain offset and an optional bias.

    Args:
        normalized_shape, eps, elementwise_affine, device, dtype: as torch.nn.RMSNorm (eps=None means
            torch.finfo(torch.float32).eps).
        partial: p in (0, 1]. The statistic is taken over the first k = max(1, ceil(p * n)) of the n
            normalized elements (pRMSNorm); 1 is RMSNorm.
        weight_offset: the gain used is weight_offset + weight (Gemma's (1 + w) is weight_offset=1). The
            weight starts at 1 - weight_offset so that a new module has gain 1 whatever the offset.
        bias: add a learnable bias (the paper's optional b), initialized to zeros. Off by default, which
            keeps the state_dict identical to torch.nn.RMSNorm's.
    """

    def __init__(
        self,
        normalized_shape,
        eps: Optional[float] = None,
        elementwise_affine: bool = True,
        *,
        partial: float = 1.0,
        weight_offset: float = 0.0,
        bias: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        fn = "rmsnorm.torch.RMSNorm"
        shape = F.normalized_shape_tuple(fn, normalized_shape)
        if eps is not None:
            eps = check_eps(fn, eps)
        partial = check_partial(fn, partial)
        weight_offset = check_offset(fn, weight_offset)
        if dtype is not None and dtype not in F._DTYPES:
            raise TypeError(f"{fn}: dtype must be one of {F._DTYPE_NAMES}, got {dtype}")
        super().__init__(shape, eps, elementwise_affine, device=device, dtype=dtype)
        self.partial = partial
        self.weight_offset = weight_offset
        if bias:
            self.bias = nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # torch's __init__ calls this before our attributes exist, hence the getattr defaults.
        if self.elementwise_affine:
            nn.init.constant_(self.weight, 1.0 - getattr(self, "weight_offset", 0.0))
        if getattr(self, "bias", None) is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps, partial=self.partial,
                          weight_offset=self.weight_offset, bias=self.bias)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        if self.partial != 1.0:
            s += f", partial={self.partial}"
        if self.weight_offset != 0.0:
            s += f", weight_offset={self.weight_offset}"
        if self.bias is not None:
            s += ", bias=True"
        return s


class FusedAddRMSNorm(RMSNorm):
    """RMSNorm with the residual add before it fused in: ``y, h = norm(x, residual)`` gives h = x + residual
    and y = RMSNorm(h), as Liger's LigerFusedAddRMSNorm. The arguments, parameters and state_dict are
    RMSNorm's (so torch.nn.RMSNorm's), and ``norm(x)`` without a residual is plain RMSNorm.

    In a pre-norm block, ``y, h = norm(attn_out, h)`` replaces ``h = h + attn_out; y = norm(h)``.
    ``norm.forward_inplace(x, residual)`` is the in-place inference form (vLLM's semantics: residual
    becomes x + residual and x becomes the normalized output).
    """

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        if residual is None:
            return super().forward(x)
        return F.add_rms_norm(x, residual, self.weight, self.eps, normalized_shape=self.normalized_shape,
                              partial=self.partial, weight_offset=self.weight_offset, bias=self.bias)

    def forward_inplace(self, x: torch.Tensor, residual: torch.Tensor):
        return F.fused_add_rms_norm_(x, residual, self.weight, self.eps, normalized_shape=self.normalized_shape,
                                     partial=self.partial, weight_offset=self.weight_offset, bias=self.bias)


class LayerNorm(nn.LayerNorm):
    """torch.nn.LayerNorm (same arguments, parameters and state_dict) running the rmsnorm kernels."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        fn = "rmsnorm.torch.LayerNorm"
        shape = F.normalized_shape_tuple(fn, normalized_shape)
        eps = check_eps(fn, eps)
        if dtype is not None and dtype not in F._DTYPES:
            raise TypeError(f"{fn}: dtype must be one of {F._DTYPE_NAMES}, got {dtype}")
        super().__init__(shape, eps, elementwise_affine, bias, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


def _plain_layer_norm(m) -> bool:
    # A subclass that overrides forward may do more than normalize (a channels-first LayerNorm2d that
    # permutes, say); swapping it would change what the model computes, so it is left alone.
    return isinstance(m, nn.LayerNorm) and type(m).forward in (nn.LayerNorm.forward, LayerNorm.forward)


def _rms_from_layer(ln: nn.LayerNorm, partial: float) -> RMSNorm:
    affine = ln.elementwise_affine
    has_bias = affine and ln.bias is not None
    like = ln.weight if affine else None
    rms = RMSNorm(ln.normalized_shape, ln.eps, affine, partial=partial, bias=has_bias,
                  device=like.device if like is not None else None, dtype=like.dtype if like is not None else None)
    if affine:
        # The very Parameter objects move over: trained gains stay, and an optimizer built before the
        # swap keeps updating them.
        rms.weight = ln.weight
        if has_bias:
            rms.bias = ln.bias
    rms.train(ln.training)
    return rms


def replace_layernorm(module: nn.Module, partial: float = 1.0) -> nn.Module:
    """Swap every torch.nn.LayerNorm in ``module`` for our RMSNorm, in place: the paper's drop-in replacement.

    Each replacement keeps the LayerNorm's normalized_shape, eps, training mode, and its weight and bias
    Parameters themselves (so learned gains and existing optimizers carry over); it drops the
    re-centering, which is what RMSNorm is. partial < 1 gives pRMSNorm. A LayerNorm shared by several
    parents becomes one shared RMSNorm. Subclasses of LayerNorm that override forward are left alone.
    Hooks registered on the old modules do not move.

    Returns ``module``, or its replacement when ``module`` is itself a LayerNorm.
    """
    fn = "rmsnorm.torch.replace_layernorm"
    if not isinstance(module, nn.Module):
        raise TypeError(f"{fn}: module must be a torch.nn.Module, got {type(module).__name__}")
    partial = check_partial(fn, partial)
    if _plain_layer_norm(module):
        return _rms_from_layer(module, partial)
    done = {}
    for parent in list(module.modules()):
        # _modules, not named_children(): that skips a module seen before under another name.
        for name, child in list(parent._modules.items()):
            if _plain_layer_norm(child):
                if id(child) not in done:
                    done[id(child)] = (child, _rms_from_layer(child, partial))
                setattr(parent, name, done[id(child)][1])
    return module
