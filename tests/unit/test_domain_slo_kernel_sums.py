"""The kernel's sums over partitions add row after row, bit for bit, however they are worked out.

``hub.column_sums`` promises ``np.cumsum(axis=0)[-1]``'s bits (the engine's batch of one and a
sweep's columns must add alike); it takes faster routes to them, and these tests hold every
route to that promise over random shapes, magnitudes, signed zeros, infinities and NaN, and
over the layouts a caller may pass (one column, strided and reversed views, Fortran order,
rows standing for several partitions).
"""

from __future__ import annotations

import numpy as np
import pytest

from scaling.domain import slo_kernel as kernel


def _sequential(rows: np.ndarray) -> np.ndarray:
    """The promise: the first row, then each next row added to the running sum."""
    return np.cumsum(rows, axis=0)[-1]


def _random_rows(rng: np.random.Generator, rows: int, columns: int) -> np.ndarray:
    """Values of mixed magnitudes and signs (sums whose order shows in the last bits), with a few
    signed zeros, infinities and NaN."""
    values = rng.uniform(-1.0, 1.0, (rows, columns)) * 10.0 ** rng.integers(-8, 9, (rows, columns))
    special = rng.random((rows, columns))
    values[special < 0.03] = -0.0
    values[(special >= 0.03) & (special < 0.05)] = 0.0
    values[(special >= 0.05) & (special < 0.055)] = np.inf
    values[(special >= 0.055) & (special < 0.058)] = np.nan
    return values


def _same_bits(got: np.ndarray, expected: np.ndarray) -> bool:
    return got.shape == expected.shape and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("seed", range(40))
def test_column_sums_add_row_after_row_bit_for_bit(seed: int) -> None:
    """Random shapes (1 to 70 rows, 1 to 1,000 columns, one column included) in every layout."""
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(1, 71))
    columns = 1 if seed % 4 == 0 else int(rng.choice([2, 3, 8, 17, 64, 203, 811, 1000]))
    values = _random_rows(rng, rows, columns)
    wide = _random_rows(rng, rows, 2 * columns + 1)
    layouts = {
        "c-contiguous": values,
        "fortran": np.asfortranarray(values),
        "rows-reversed": values[::-1],
        "every-other-column": wide[:, ::2],
        "column-slice": wide[:, 1:columns + 1],
        "transposed": np.ascontiguousarray(values.T).T,
    }
    for name, layout in layouts.items():
        assert _same_bits(kernel.column_sums(layout), _sequential(layout)), name


@pytest.mark.parametrize("seed", range(20))
def test_column_sums_of_shared_rows_add_partition_after_partition(seed: int) -> None:
    """Rows standing for several partitions (``row_of``) add once per partition, in partition order."""
    rng = np.random.default_rng(1000 + seed)
    rows, partitions = int(rng.integers(1, 5)), int(rng.integers(1, 65))
    columns = 1 if seed % 3 == 0 else int(rng.choice([2, 5, 300, 811]))
    values = _random_rows(rng, rows, columns)
    row_of = rng.integers(0, rows, partitions)
    assert _same_bits(kernel.column_sums(values, row_of), _sequential(values[row_of]))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param([[-0.0, -0.0], [-0.0, 1.0]], [-0.0, 1.0], id="signed-zeros-stay-negative"),
        pytest.param([[1e16, 1e16], [1.0, 1.0], [1.0, -1e16]], [1e16, 0.0], id="order-shows-in-the-last-bits"),
        pytest.param([[-0.0]], [-0.0], id="one-row-one-column"),
    ],
)
def test_column_sums_cases(values, expected) -> None:
    got = kernel.column_sums(np.array(values))
    assert _same_bits(got, np.array(expected)), got
