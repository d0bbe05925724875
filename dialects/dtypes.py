"""The numpy dtype of each loom element type: what a kernel's arrays hold.

bf16 is `ml_dtypes.bfloat16` (the package JAX uses for numpy bf16 arrays), ui8 numpy's
uint8, i8 int8, i32 int32. One table, read by the kernel's argument specs, the disk cache,
the numpy reference and the Python front end.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import bf16, f32, f64, i8, i32
from xdsl.ir import Attribute

from dialects.loom import ELEMENT_TYPES, ui8

BY_TYPE: dict[Attribute, np.dtype] = {
    f32: np.dtype(np.float32),
    f64: np.dtype(np.float64),
    bf16: np.dtype(ml_dtypes.bfloat16),
    i8: np.dtype(np.int8),
    ui8: np.dtype(np.uint8),
    i32: np.dtype(np.int32),
}
assert set(BY_TYPE) == set(ELEMENT_TYPES)

#: numpy dtype -> the loom element type
BY_DTYPE: dict[np.dtype, Attribute] = {d: t for t, d in BY_TYPE.items()}


def numpy_dtype(t: Attribute) -> np.dtype | None:
    """The dtype of element type `t`, or None when loom ops do not take it."""
    return BY_TYPE.get(t)
