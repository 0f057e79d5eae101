"""rmsnorm: RMSNorm (Zhang & Sennrich, 2019), pRMSNorm, LayerNorm and L2-Norm as fast, deterministic CPU kernels.

NumPy functions live here; the PyTorch drop-in (modules, functionals, autograd, torch.compile) is
``rmsnorm.torch``, imported on demand so that NumPy users do not pay for importing torch.

    >>> import numpy as np, rmsnorm
    >>> y = rmsnorm.rms_norm(np.ones((2, 8), np.float32), eps=0.0)
"""
from ._numpy import l2_norm, layer_norm, rms_norm, rms_norm_quantized
from ._runtime import (
    __version__,
    cpu_target,
    get_backend,
    get_num_threads,
    partial_size,
    set_backend,
    set_cpu_target,
    set_num_threads,
    use_backend,
)

__all__ = [
    "__version__",
    "cpu_target",
    "get_backend",
    "get_num_threads",
    "l2_norm",
    "layer_norm",
    "partial_size",
    "rms_norm",
    "rms_norm_quantized",
    "set_backend",
    "set_cpu_target",
    "set_num_threads",
    "use_backend",
]
