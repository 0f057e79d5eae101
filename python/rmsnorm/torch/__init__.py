"""rmsnorm.torch: the rmsnorm kernels as a drop-in for torch.nn.RMSNorm, F.rms_norm, nn.LayerNorm, F.layer_norm.

The kernels are registered as torch.library custom ops (namespace ``rmsnorm``) with fake implementations
and autograd through the fused backward kernels, so the modules train, work under torch.compile with
fullgraph=True, under DistributedDataParallel and FSDP2, and on row-sharded DTensors (_sharding.py).
add_rms_norm / FusedAddRMSNorm fuse a residual add into the norm. CPU tensors only, for now.
"""
from .functional import (RMS_NORM_DEFAULT_EPS, add_rms_norm, add_rms_norm_quantized, fused_add_rms_norm_, layer_norm,
                         rms_norm, rms_norm_quantized)
from .modules import FusedAddRMSNorm, LayerNorm, RMSNorm, replace_layernorm

__all__ = ["FusedAddRMSNorm", "LayerNorm", "RMSNorm", "RMS_NORM_DEFAULT_EPS", "add_rms_norm", "add_rms_norm_quantized",
           "fused_add_rms_norm_", "layer_norm", "replace_layernorm", "rms_norm", "rms_norm_quantized"]
