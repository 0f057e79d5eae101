"""Strided rows for the C ABI's _ex calls, shared by the NumPy and torch front ends.

An array's rows are its leading axes in C order; the library addresses row r of a tensor at
(r // inner_rows) * outer + (r % inner_rows) * inner elements (rmsnorm_config_ex), which covers a slice
of rows or columns and QK-norm's (tokens, heads) inside a fused QKV buffer. Shapes and strides here are
in elements.
"""


def _merged_axes(shape, strides):
    """The leading axes of more than one element as (count, stride), outermost first, with neighbours
    that step through memory as one axis merged; None when a row is not contiguous or a stride is
    negative."""
    if shape[-1] > 1 and strides[-1] != 1:
        return None
    merged = []
    for count, stride in zip(reversed(shape[:-1]), reversed(strides[:-1])):
        if count == 1:
            continue
        if stride < 0:
            return None
        if merged and stride == merged[-1][0] * merged[-1][1]:
            merged[-1] = (merged[-1][0] * count, merged[-1][1])
        else:
            merged.append((count, stride))
    return merged[::-1]


def inner_rows_of(shape, strides):
    """The row split a layout has of itself: the inner level's count for two levels, else 1."""
    axes = _merged_axes(shape, strides)
    return axes[1][0] if axes is not None and len(axes) == 2 else 1


def layout(shape, strides, inner_rows):
    """(outer, inner) strides for row r = (r // inner_rows, r % inner_rows), or None when the rows cannot
    be addressed that way (more levels, or rows out of order or overlapping, which the library refuses)."""
    axes = _merged_axes(shape, strides)
    if axes is None:
        return None
    cols = shape[-1]
    if not axes:  # one row
        return cols * inner_rows, cols
    if len(axes) == 1:
        count, stride = axes[0]
        outer, inner, outer_rows = stride * inner_rows, stride, count // inner_rows
    elif len(axes) == 2 and axes[1][0] == inner_rows:
        (outer_rows, outer), (_, inner) = axes
    else:
        return None
    if (inner_rows > 1 and inner < cols) or (outer_rows > 1 and outer < (inner_rows - 1) * inner + cols):
        return None
    return outer, inner


def plan(x_shape, x_strides, y_shape, y_strides):
    """(inner_rows, x's (outer, inner), y's (outer, inner)) for a call reading x and writing y; x's
    layout is None when x must be copied (contiguous) first, y's when y cannot be written in place."""
    for inner_rows in dict.fromkeys((inner_rows_of(x_shape, x_strides), inner_rows_of(y_shape, y_strides))):
        x_layout, y_layout = layout(x_shape, x_strides, inner_rows), layout(y_shape, y_strides, inner_rows)
        if x_layout is not None and y_layout is not None:
            return inner_rows, x_layout, y_layout
    inner_rows = inner_rows_of(y_shape, y_strides)
    return inner_rows, None, layout(y_shape, y_strides, inner_rows)


def strides_argument(x_layout, y_layout, residual_layout=(0, 0), residual_out_layout=(0, 0), dy_layout=(0, 0),
                     dx_layout=(0, 0)):
    """The _ex bindings' strides: (outer, inner) of x, residual, y, residual_out, dy, dx (0 = packed)."""
    return (*x_layout, *residual_layout, *y_layout, *residual_out_layout, *dy_layout, *dx_layout)


def plan_reads(inputs):
    """For a call that reads the row tensors `inputs` ((shape, strides) each; strides None when not
    whole elements) and writes only packed outputs, which suit any row split: (inner_rows, layouts),
    the split that reads the most inputs in place, with layouts[i] None where input i must be copied
    (made contiguous) first."""
    best = None
    for inner_rows in dict.fromkeys(inner_rows_of(shape, strides) for shape, strides in inputs if strides):
        layouts = [None if strides is None else layout(shape, strides, inner_rows) for shape, strides in inputs]
        placed = sum(p is not None for p in layouts)
        if best is None or placed > best[0]:
            best = (placed, inner_rows, layouts)
    if best is None:
        return 1, [None] * len(inputs)
    return best[1], best[2]
