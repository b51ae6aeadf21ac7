"""A batch of one as plain numbers: the four selections every per-candidate rule is written with."""

from __future__ import annotations

import numpy as np

# The per-candidate rules below are written with these four instead of their numpy names, so
# that one implementation serves both callers: the batched simulator passes arrays (numpy does
# the work), the engine passes a batch of one as plain Python numbers, and then the same
# selection and the same IEEE arithmetic run without numpy's overhead per call (a few
# microseconds each, most of such a rule's cost in a batch of one). NaN propagates as in numpy.

#: A rate that stands for none: divides without a zero, and reads as unknown.
NO_RATE = 1e-9

_PLAIN = frozenset((bool, int, float))


def where(condition, yes, no):
    """``np.where``; for plain numbers, the one chosen."""
    if type(condition) in _PLAIN and type(yes) in _PLAIN and type(no) in _PLAIN:
        return yes if condition else no
    return np.where(condition, yes, no)


def minimum(first, second):
    """``np.minimum``; for plain numbers, the smaller (NaN if either is, the first NaN first)."""
    if type(first) in _PLAIN and type(second) in _PLAIN:
        return first if first < second or first != first else second
    return np.minimum(first, second)


def maximum(first, second):
    """``np.maximum``; for plain numbers, the larger (NaN if either is, the first NaN first)."""
    if type(first) in _PLAIN and type(second) in _PLAIN:
        return first if first > second or first != first else second
    return np.maximum(first, second)


def negation(flags):
    """``~flags`` for boolean arrays; ``not flags`` for a plain bool (``~True`` is -2)."""
    return (not flags) if type(flags) is bool else ~flags


def is_nan(values):
    """``np.isnan``, as ``values != values`` (NaN is the one value unequal to itself), which
    plain numbers answer too."""
    return values != values


def any_of(flags) -> bool:
    """``bool(flags.any())``: a batch of one's flag read directly, a sweep's reduced without
    ``ndarray.any``'s Python wrapper (a microsecond a call, called at every evaluation)."""
    if type(flags) is bool:
        return flags
    return bool(flags.flat[0]) if flags.size == 1 else bool(np.logical_or.reduce(flags, axis=None))


def all_of(flags) -> bool:
    """``bool(flags.all())``, as ``any_of`` reads it."""
    if type(flags) is bool:
        return flags
    return bool(flags.flat[0]) if flags.size == 1 else bool(np.logical_and.reduce(flags, axis=None))


def filled(shape, value, dtype=float) -> np.ndarray:
    """``np.full``, without its Python wrapper (an empty array filled: the same values)."""
    values = np.empty(shape, dtype=dtype)
    values.fill(value)
    return values


def clip(values, low, high):
    """``np.clip``; for plain numbers the same choice: ``low`` only where the value is below
    it, ``high`` only where above (so -0.0 stays -0.0 at a ``low`` of 0.0, and NaN stays NaN)."""
    if type(values) in _PLAIN:
        raised = low if values < low else values
        return high if raised > high else raised
    return np.clip(values, low, high)


def plain(values: np.ndarray):
    """A batch of one's value as a plain number (the rules then run without numpy's overhead per
    call, the same IEEE arithmetic); a sweep's as it is."""
    return values.item() if values.size == 1 else values


def chosen_columns(rows: np.ndarray, count: int) -> np.ndarray | slice:
    """The chosen columns of ``count`` as an index: all of them as a slice (no copies then)."""
    return slice(None) if rows.size == count else rows
