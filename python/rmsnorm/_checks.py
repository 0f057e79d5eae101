"""Argument checks shared by the NumPy and the torch front ends.

They run before any kernel call so that a bad argument is a Python exception naming the argument,
never a crash and never a half-written output. TypeError: the argument has the wrong type or dtype;
ValueError: the right type with a value out of range (shape, eps, partial).
"""
import math
import numbers


def check_real(fn, name, value, *, low=None, low_open=False, high=None):
    """A finite real number (bool is refused: eps=True is a mistake, not 1.0), within [low, high]."""
    if type(value) is not float:  # the common case skips the slower abstract-class check
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}")
        value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{fn}: {name} must be finite, got {value}")
    if low is not None and (value < low or (low_open and value == low)):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ValueError(f"{fn}: {name} must be {bound}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{fn}: {name} must be <= {high}, got {value}")
    return value


_F32_MAX = 3.4028234663852886e38


def check_eps(fn, eps):
    # The kernels take eps as f32; a larger value would silently become infinity.
    return check_real(fn, "eps", eps, low=0.0, high=_F32_MAX)


def check_partial(fn, partial):
    return check_real(fn, "partial", partial, low=0.0, low_open=True, high=1.0)


def check_offset(fn, weight_offset):
    return check_real(fn, "weight_offset", weight_offset, low=-_F32_MAX, high=_F32_MAX)


def check_int(fn, name, value, *, low=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{fn}: {name} must be >= {low}, got {value}")
    return value
