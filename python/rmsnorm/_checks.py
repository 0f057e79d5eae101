"""Argument checks shared by the NumPy and the torch front ends.

They run before any kernel call so that a bad argument is a Python exception naming the argument,
never a crash and never a half-written output. TypeError: the argument has the wrong type or dtype;
ValueError: the right type with a value out of range (shape, eps, partial).

The range checks are comparisons only (no math.isfinite): torch.compile traces them as they are, even
where it turns a float into a symbol, and a NaN fails every comparison, so the ranges catch it.
"""
import numbers

F32_MAX = 3.4028234663852886e38


def check_real(fn, name, value, *, low=-F32_MAX, low_open=False, high=F32_MAX):
    """A real number in [low, high] (or (low, high]); bool is refused (eps=True is a mistake, not 1.0)."""
    if type(value) is not float:  # the common case skips the slower abstract-class check
        if type(value).__name__ in ("SymFloat", "SymInt"):  # torch.compile's symbols stay symbols
            pass
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{fn}: {name} must be a real number, got {type(value).__name__}")
        else:
            value = float(value)  # ints, NumPy scalars: the ops' schemas take a Python float
    above = value > low if low_open else value >= low
    if not (above and value <= high):
        if low_open:
            want = f"> {low} and <= {high}"
        elif low == -F32_MAX and high == F32_MAX:
            want = "finite (within the float32 range)"
        else:
            want = f">= {low} and <= {high}"
        raise ValueError(f"{fn}: {name} must be {want}, got {value}")
    return value


def check_eps(fn, eps):
    # The kernels take eps as f32; a larger value would silently become infinity.
    return check_real(fn, "eps", eps, low=0.0)


def check_partial(fn, partial):
    return check_real(fn, "partial", partial, low=0.0, low_open=True, high=1.0)


def check_offset(fn, weight_offset):
    return check_real(fn, "weight_offset", weight_offset)


def check_int(fn, name, value, *, low=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{fn}: {name} must be >= {low}, got {value}")
    return value
