"""Array types and input checks shared by the closed forms of every experiment (``theory.py``)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def as_float(value: ArrayLike) -> FloatArray:
    """``value`` as a float64 array (scalars become 0-d arrays)."""
    return np.asarray(value, dtype=np.float64)


def require(condition: ArrayLike, message: str) -> None:
    """Raise ``ValueError(message)`` unless ``condition`` holds everywhere (False wherever a value
    is invalid or NaN)."""
    if not np.all(condition):
        raise ValueError(message)
