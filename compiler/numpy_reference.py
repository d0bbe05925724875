"""The numpy reference: a loom function evaluated op by op in float64.

Used by the tests and by `loom-run` to check what the compiled kernel computes, and by
`flops` / `reduction_length` for GFLOP/s and error bounds.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import func
from xdsl.ir import SSAValue

from passes.support.diagnostics import LoomError
from dialects import loom


def conv2d_nchw(x: np.ndarray, w: np.ndarray, strides, padding, dilations) -> np.ndarray:
    """Cross-correlation, NCHW input, FCHW filter, accumulated in x's dtype."""
    n, c, h, wd = x.shape
    f, _, r, s = w.shape
    (sh, sw), (ph, pw), (dh, dw) = strides, padding, dilations
    ho, wo = loom.conv2d_output_hw(h, wd, r, s, strides, padding, dilations)
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), dtype=x.dtype)
    xp[:, :, ph : ph + h, pw : pw + wd] = x
    out = np.zeros((n, f, ho, wo), dtype=x.dtype)
    for ri in range(r):
        for si in range(s):
            win = xp[:, :, ri * dh : ri * dh + sh * (ho - 1) + 1 : sh, si * dw : si * dw + sw * (wo - 1) + 1 : sw]
            out += np.einsum("nchw,fc->nfhw", win, w[:, :, ri, si])
    return out


def conv2d_nhwc(x: np.ndarray, w: np.ndarray, strides, padding, dilations) -> np.ndarray:
    """The same on NHWC input and an HWCF filter (R x S x C x F), NHWF out."""
    y = conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), strides, padding, dilations)
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1))


def evaluate_op(op: loom.LoomComputeOp, args: list[np.ndarray], dtype=np.float64) -> np.ndarray:
    a = [np.asarray(x, dtype=dtype) for x in args]
    if isinstance(op, loom.MatmulOp):
        return np.matmul(a[0], a[1])
    if isinstance(op, loom.Conv2DOp):
        conv = conv2d_nchw if op.layout_name() == "nchw" else conv2d_nhwc
        return conv(a[0], a[1], *op.conv_params())
    if isinstance(op, loom.AddOp):
        return a[0] + a[1]
    if isinstance(op, loom.MulOp):
        return a[0] * a[1]
    if isinstance(op, loom.ReluOp):
        return np.maximum(a[0], a[0].dtype.type(0))
    raise LoomError(f"no reference for '{op.name}'", op)


def evaluate_view(op: loom.LoomViewOp, a: np.ndarray) -> np.ndarray:
    """The value of a view op, by numpy's own operations (not by the strides that
    loom-bufferize computes for it: the tests check those against these)."""
    if isinstance(op, loom.TransposeOp):
        return np.transpose(a, op.perm)
    if isinstance(op, loom.SliceOp):
        offsets, sizes, strides = op.params()
        picked = np.ix_(*(o + st * np.arange(n) for o, n, st in zip(offsets, sizes, strides)))
        return np.asarray(a[picked]).reshape(sizes)  # (a[()] of a 0-d array is a scalar)
    if isinstance(op, loom.BroadcastToOp):
        return np.broadcast_to(a, op.result_shape)
    if isinstance(op, loom.ReshapeOp):
        return np.reshape(a, op.result_shape)
    if isinstance(op, loom.ContiguousOp):
        return np.array(a, order="C", copy=True)
    raise LoomError(f"no reference for '{op.name}'", op)


def evaluate(fn: func.FuncOp, arrays: list[np.ndarray], dtype=np.float64) -> tuple[np.ndarray, ...]:
    """Evaluate a loom-dialect function on numpy arrays; returns its results in `dtype`
    (float64 for checking; the inputs' own dtype to time numpy's BLAS on the same work).
    A bufferized op writes into its `outs` array (so memref arguments are updated)."""
    block = fn.body.block
    if len(arrays) != len(block.args):
        raise LoomError(f"@{fn.sym_name.data} takes {len(block.args)} arrays, got {len(arrays)}", fn)
    env: dict[SSAValue, np.ndarray] = {}
    for arg, arr in zip(block.args, arrays):
        env[arg] = np.asarray(arr, dtype=dtype)
    for op in block.ops:
        if isinstance(op, loom.LoomComputeOp):
            value = evaluate_op(op, [env[v] for v in op.ins], dtype)
            if op.is_bufferized:
                env[op.outs[0]][...] = value
            else:
                env[op.res[0]] = value
        elif isinstance(op, loom.LoomViewOp):
            env[op.result] = evaluate_view(op, env[op.input])
        elif isinstance(op, func.ReturnOp):
            return tuple(env[v] for v in op.arguments)
        else:
            raise LoomError(f"the numpy reference evaluates loom ops only, not '{op.name}'", op)
    return ()


def _compute_ops(fn: func.FuncOp):
    return [op for op in fn.walk() if isinstance(op, loom.LoomComputeOp)]


def flops(fn: func.FuncOp) -> int:
    """Floating-point operations of one call: 2 per multiply-add, 1 per elementwise op."""
    total = 0
    for op in _compute_ops(fn):
        out = int(np.prod(op.output_type.get_shape()))
        if isinstance(op, loom.MatmulOp):
            total += 2 * out * op.ins[0].type.get_shape()[-1]
        elif isinstance(op, loom.Conv2DOp):
            c, r, s = op.window()
            total += 2 * out * c * r * s
        else:
            total += out
    return total


def reduction_length(fn: func.FuncOp) -> int:
    """The longest chain of accumulations into one output value (K for matmul, C*R*S for
    conv2d; chained ops add up), for the error bound of about 4*K*eps*max|ref|."""
    total = 0
    for op in _compute_ops(fn):
        if isinstance(op, loom.MatmulOp):
            total += op.ins[0].type.get_shape()[-1]
        elif isinstance(op, loom.Conv2DOp):
            c, r, s = op.window()
            total += c * r * s
        else:
            total += 1
    return max(total, 1)
