"""Process-wide settings of the library and what it reports about itself."""
import contextlib

from . import _C
from ._checks import check_int, check_partial

__version__ = _C.version()

_BACKENDS = {"auto": _C.BACKEND_AUTO, "reference": _C.BACKEND_REFERENCE}
_BACKEND_NAMES = {code: name for name, code in _BACKENDS.items()}


def partial_size(cols, partial):
    """k, the number of leading elements pRMSNorm takes its statistic from: max(1, ceil(partial * cols)).

    Computed by the library, so it is exactly the k the kernels use. A product within f32 rounding of an
    integer counts as that integer (partial=0.1, cols=10 gives 1).
    """
    fn = "rmsnorm.partial_size"
    cols = check_int(fn, "cols", cols, low=1)
    partial = check_partial(fn, partial)
    return _C.partial_size(cols, partial)


# The thread count rmsnorm.torch last set to follow torch's (0: none yet, or overridden since by
# set_num_threads): a list, so that rmsnorm.torch updates it in place without a global statement.
threads_set_for_torch = [0]


def set_num_threads(n):
    """Threads the kernels use; 0 means all hardware threads. Results do not depend on it, bit for bit.

    The default is all hardware threads, or RMSNORM_NUM_THREADS from the environment. Calls through
    rmsnorm.torch use torch's intra-op thread count instead (torch.get_num_threads()): the next such call
    sets it again, for the whole process, so this setting holds for NumPy calls until then.
    """
    n = check_int("rmsnorm.set_num_threads", "n", n, low=0)
    if n > 2**31 - 1:
        raise ValueError(f"rmsnorm.set_num_threads: n must fit in a C int, got {n}")
    _C.set_num_threads(n)
    threads_set_for_torch[0] = 0


def get_num_threads():
    """Threads the kernels use."""
    return _C.get_num_threads()


def set_backend(name):
    """'auto' (the SIMD kernels, threaded) or 'reference' (plain loops in double: the test oracle).

    Process-wide; the environment variable RMSNORM_BACKEND=reference selects the reference at start-up.
    """
    if not isinstance(name, str):
        raise TypeError(f"rmsnorm.set_backend: name must be a str, got {type(name).__name__}")
    if name not in _BACKENDS:
        raise ValueError(f"rmsnorm.set_backend: name must be one of {sorted(_BACKENDS)}, got {name!r}")
    _C.set_backend(_BACKENDS[name])


def get_backend():
    """'auto' or 'reference'."""
    return _BACKEND_NAMES[_C.get_backend()]


@contextlib.contextmanager
def use_backend(name):
    """Run a block on one backend and restore the previous one after: ``with rmsnorm.use_backend('reference'):``."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)


def cpu_target():
    """The SIMD target the kernels run on in this process ("AVX2", "AVX3", "AVX3_BF16", "NEON", ...)."""
    return _C.cpu_target()


def set_cpu_target(name):
    """Limit the kernels to the best SIMD target at or below ``name`` ("AVX3_BF16", "AVX3", "AVX2", "SSE4",
    "SCALAR"; "SVE2", "SVE", "NEON", "EMU128"; case-insensitive), or ``"auto"`` for the best the CPU has.
    AVX3_BF16 is AVX3 with bf16 outputs rounded by the CPU's AVX512_BF16 instruction.

    Every target gives the same bits, so this changes speed only. Process-wide; the environment variable
    RMSNORM_CPU_TARGET sets the first limit when the library loads. Raises ValueError for a name that is
    not a target of this build.
    """
    if not isinstance(name, str):
        raise TypeError(f"rmsnorm.set_cpu_target: name must be a str, got {type(name).__name__}")
    _C.set_cpu_target(name)
