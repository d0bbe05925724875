"""The numpy dtype of each loom element type: what a kernel's arrays hold.

bf16 is `ml_dtypes.bfloat16` (the package JAX uses for numpy bf16 arrays), ui8 numpy's
uint8, i8 int8, i32 int32. One table, read by the kernel's argument specs, the disk cache,
the numpy reference and the Python front end. It is keyed by the element type's name
("f32", "bf16"), with no xDSL here: the disk cache's hit path reads it and never imports
xDSL (half a second); ml_dtypes (a tenth) is imported where a bf16 dtype is first asked
for, which that path's f32 kernels never do.
"""

from __future__ import annotations

import functools

import numpy as np

#: loom element type -> numpy dtype name (dialects/loom.py's ELEMENT_TYPES, in order)
NUMPY_NAMES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16", "i8": "int8", "ui8": "uint8", "i32": "int32"}

#: G of a low-precision filter in panels of groups (`loom.conv2d`'s rank 6): the k its
#: dot-product instruction reads per lane (vdpbf16ps's pairs, vpdpbusd's quads)
FILTER_GROUPS = {"bf16": 2, "i8": 4, "ui8": 4}


@functools.cache
def dtype_named(name: str) -> np.dtype | None:
    """The dtype numpy calls `name` ("float32", "bfloat16"), if kernels take it."""
    if name not in NUMPY_NAMES.values():
        return None
    if name == "bfloat16":
        import ml_dtypes  # only here: see the module's docstring

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def numpy_dtype(element_type: object) -> np.dtype | None:
    """The dtype of a loom element type (an xDSL type or its name), or None when loom ops
    do not take it."""
    name = NUMPY_NAMES.get(str(element_type))
    return None if name is None else dtype_named(name)


def dtype_expression(dtype: np.dtype) -> str:
    """How Python code names `dtype`: np.float32, ml_dtypes.bfloat16 (numpy has no bf16)."""
    return f"np.{dtype.name}" if hasattr(np, dtype.name) else f"ml_dtypes.{dtype.name}"
