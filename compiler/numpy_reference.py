"""The numpy reference: a loom function evaluated op by op in float64 (integers in int64).

Used by the tests and by `loom-run` to check what the compiled kernel computes, and by
`flops` / `reduction_length` for GFLOP/s and error bounds.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerType, bf16, i32
from xdsl.ir import Attribute, SSAValue

from passes.support.diagnostics import LoomError
from dialects import loom, winograd


def conv2d_nchw(x: np.ndarray, w: np.ndarray, strides, padding, dilations, groups: int = 1) -> np.ndarray:
    """Cross-correlation, NCHW input, FCHW filter (F x C/groups x R x S), accumulated in
    x's dtype; with `groups`, each group's output channels from its own input channels."""
    if groups > 1:
        xs, ws = np.split(x, groups, axis=1), np.split(w, groups, axis=0)
        return np.concatenate([conv2d_nchw(a, b, strides, padding, dilations) for a, b in zip(xs, ws)], axis=1)
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


def pack_filter(w: np.ndarray, panel: int, group: int = 0) -> np.ndarray:
    """An HWCF filter (R x S x C x F) in panels of `panel` output channels, P x R x S x C x
    NR with F = P*NR (`loom.conv2d`'s filter in panels), contiguous; with `group` G, in
    panels of groups of G channels, P x R x S x C/G x NR x G."""
    r, s, c, f = w.shape
    if panel < 1 or f % panel:
        raise ValueError(f"a filter of {f} output channels does not split into panels of {panel}")
    if group < 0 or (group and c % group):
        raise ValueError(f"a filter of {c} input channels does not split into groups of {group}")
    if group:
        return np.ascontiguousarray(
            w.reshape(r, s, c // group, group, f // panel, panel).transpose(4, 0, 1, 2, 5, 3))
    return np.ascontiguousarray(w.reshape(r, s, c, f // panel, panel).transpose(3, 0, 1, 2, 4))


def unpack_filter(w: np.ndarray) -> np.ndarray:
    """The HWCF filter of one in panels, or in panels of groups (`pack_filter`'s inverse)."""
    if w.ndim == 6:
        p, r, s, cg, nr, g = w.shape
        return w.transpose(1, 2, 3, 5, 0, 4).reshape(r, s, cg * g, p * nr)
    p, r, s, c, nr = w.shape
    return w.transpose(1, 2, 3, 0, 4).reshape(r, s, c, p * nr)


def conv2d_nhwc(x: np.ndarray, w: np.ndarray, strides, padding, dilations, groups: int = 1) -> np.ndarray:
    """The same on NHWC input and an HWCF filter (R x S x C/groups x F), NHWF out."""
    y = conv2d_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), strides, padding, dilations, groups)
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1))


def pool2d(x: np.ndarray, window, strides, padding, nhwc: bool, average: bool = False,
           count_include_pad: bool = True) -> np.ndarray:
    """The greatest element of each window (NCHW, or NHWC), the border never chosen, a NaN
    in a window its maximum; or with `average` each window's mean, over its area or (not
    `count_include_pad`) over its elements inside the input."""
    if nhwc:
        y = pool2d(x.transpose(0, 3, 1, 2), window, strides, padding, False, average, count_include_pad)
        return np.ascontiguousarray(y.transpose(0, 2, 3, 1))
    n, c, h, w = x.shape
    (r, s), (sh, sw), (ph, pw) = window, strides, padding
    ho, wo = loom.conv2d_output_hw(h, w, r, s, strides, padding, (1, 1))
    fill = 0 if average else np.iinfo(x.dtype).min if x.dtype.kind == "i" else -np.inf
    xp = np.full((n, c, h + 2 * ph, w + 2 * pw), fill, dtype=x.dtype)
    xp[:, :, ph : ph + h, pw : pw + w] = x
    inside = np.zeros((h + 2 * ph, w + 2 * pw))
    inside[ph : ph + h, pw : pw + w] = 1
    out = np.full((n, c, ho, wo), fill, dtype=x.dtype)
    counts = np.zeros((ho, wo))
    for ri in range(r):
        for si in range(s):
            rows, cols = slice(ri, ri + sh * (ho - 1) + 1, sh), slice(si, si + sw * (wo - 1) + 1, sw)
            out = out + xp[:, :, rows, cols] if average else np.maximum(out, xp[:, :, rows, cols])
            counts += inside[rows, cols]
    if not average:
        return out
    return out / (r * s if count_include_pad else counts)


def _winograd(which: int, m: int, absolute: bool) -> np.ndarray:
    a = np.array(winograd.MATRICES[m][which], dtype=np.float64)
    return np.abs(a) if absolute else a


def winograd_filter(w: np.ndarray, m: int, absolute: bool = False) -> np.ndarray:
    """U[a*alpha + b, c, f] = (G g G^T)[a, b] of the HWCF filter (`loom.winograd_filter`);
    `absolute`: with |G| (what `winograd_error_bound` sums)."""
    g = _winograd(1, m, absolute)
    u = np.einsum("ar,rscf,bs->abcf", g, w, g)
    return u.reshape(-1, *w.shape[2:]).astype(w.dtype)


def winograd_input(x: np.ndarray, m: int, padding, absolute: bool = False) -> np.ndarray:
    """V[a*alpha + b, p, c] = (B^T d B)[a, b] of each input tile (`loom.winograd_input`)."""
    bt = _winograd(0, m, absolute)
    alpha = winograd.points(m)
    n, h, w, c = x.shape
    (ph, pw) = padding
    th, tw = winograd.tiles(h + 2 * ph - 2, m), winograd.tiles(w + 2 * pw - 2, m)
    xp = np.zeros((n, th * m + 2, tw * m + 2, c), dtype=x.dtype)  # the border, and past the last tile's end
    rows, cols = min(h, th * m + 2 - ph), min(w, tw * m + 2 - pw)
    xp[:, ph:ph + rows, pw:pw + cols] = x[:, :rows, :cols]
    d = np.stack([np.stack([xp[:, i * m:i * m + alpha, j * m:j * m + alpha] for j in range(tw)], 1)
                  for i in range(th)], 1)  # n, tile row, tile column, alpha, alpha, c
    v = np.einsum("ar,nijrsc,bs->abnijc", bt, d, bt)
    return v.reshape(alpha * alpha, n * th * tw, c)


def winograd_output(p: np.ndarray, m: int, shape, absolute: bool = False) -> np.ndarray:
    """Y[n, i*m + r, j*m + s, f] = (A^T M A)[r, s] of each tile's products
    (`loom.winograd_output`), the last tiles' overhang dropped."""
    at = _winograd(2, m, absolute)
    alpha = winograd.points(m)
    n, ho, wo, f = shape
    th, tw = winograd.tiles(ho, m), winograd.tiles(wo, m)
    prods = p.reshape(alpha, alpha, n, th, tw, f)
    y = np.einsum("ra,abnijf,sb->nirjsf", at, prods, at)  # n, tile row, r, tile column, s, f
    y = y.reshape(n, th * m, tw * m, f)
    return np.ascontiguousarray(y[:, :ho, :wo])


#: the rounding steps a Winograd output element takes beyond the C of its sum over the
#: channels, per point of the tile (alpha): the six passes of the three transforms (two
#: each), each at most alpha - 1 additions, a product by a constant and that constant's own
#: rounding (1/6 is not a binary fraction) along any path, and the product of U and V:
#: 6 (alpha + 1) + 1 <= 8 alpha for alpha >= 4
WINOGRAD_STEPS_PER_POINT = 8


def winograd_error_bound(x: np.ndarray, w: np.ndarray, m: int, padding, eps: float) -> np.ndarray:
    """The componentwise bound on the rounding error of a Winograd F(m x m, 3 x 3)
    convolution of the NHWC input x by the HWCF filter w computed in a precision of unit
    roundoff `eps` (each step rounded once, in any order of the sums), in the manner of
    Higham's bound |C^ - C| <= gamma_K |A||B| for a matmul: (C + 8 alpha) eps times the
    convolution computed with |A^T|, |G|, |B^T| on |x| and |w|,

        |Y^ - Y| <= (C + 8 alpha) eps |A^T| [ sum_c (|G| |g| |G^T|) * (|B^T| |d| |B|) ] |A|.

    Stated to first order in eps (the gamma_k = k eps / (1 - k eps) of a full analysis
    differs in the third digit at C = 512 in f32). docs/guide/winograd.md says what it is
    on ResNet-18's layers."""
    c = x.shape[3]
    alpha = winograd.points(m)
    u = winograd_filter(np.abs(w).astype(np.float64), m, absolute=True)
    v = winograd_input(np.abs(x).astype(np.float64), m, padding, absolute=True)
    n, h, wd, _ = x.shape
    shape = (n, h + 2 * padding[0] - 2, wd + 2 * padding[1] - 2, w.shape[3])
    return (c + WINOGRAD_STEPS_PER_POINT * alpha) * eps * winograd_output(np.matmul(v, u), m, shape, absolute=True)


def winograd_growth(m: int) -> float:
    """How many times the direct convolution's |x| |w| sum (9 per output on ones) Winograd
    F(m x m, 3 x 3)'s componentwise bound sums (`winograd_error_bound`'s convolution with
    the matrices' absolute values, on ones): 64/9 for F(2x2), 256 for F(4x4). A bound of
    the form K eps max|Y| grows by that much (`reduction_length`)."""
    alpha = winograd.points(m)
    ones = np.ones((1, 3 * m, 3 * m, 1))
    sums = winograd_error_bound(ones, np.ones((3, 3, 1, 1)), m, (1, 1), 1.0) / (1 + WINOGRAD_STEPS_PER_POINT * alpha)
    return float(sums.max()) / 9


def domain(element_type: Attribute, dtype=np.float64) -> np.dtype:
    """The dtype the reference holds values of `element_type` in: int64 for the integers
    (exact; an i32 result is then wrapped as the kernel's arithmetic wraps), else `dtype`."""
    return np.dtype(np.int64) if isinstance(element_type, IntegerType) else np.dtype(dtype)


def _wrap_i32(v: np.ndarray) -> np.ndarray:
    """int64 values taken modulo 2^32 into i32's range, as i32 additions and products wrap."""
    return (v + 2**31) % 2**32 - 2**31


def _per_channel(v: np.ndarray, op: loom.AffineQuantizationOp, rank: int) -> np.ndarray:
    """A quantization parameter shaped to broadcast against the input along op's axis."""
    axis = op.quantization_axis(rank)
    return v if axis is None else v.reshape([-1 if d == axis else 1 for d in range(rank)])


def _quantize(op: loom.QuantizeOp, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """In f32, as the kernel computes it: round_half_even(x / scale) + zero point, clamped
    with fmax/fmin (a NaN gives the least value)."""
    least, greatest = loom.QUANTIZED[op.output_type.get_element_type()]
    scale = _per_channel(scale.astype(np.float32), op, x.ndim)
    zero_point = _per_channel(zero_point, op, x.ndim).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint(x.astype(np.float32) / scale) + zero_point
    return np.fmin(np.fmax(q, np.float32(least)), np.float32(greatest)).astype(np.int64)


def _dequantize(op: loom.DequantizeOp, q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, dtype) -> np.ndarray:
    """f32(q - zero point) * scale, the difference in i32, the product in f32."""
    diff = _wrap_i32(q - _per_channel(zero_point, op, q.ndim))
    return (diff.astype(np.float32) * _per_channel(scale.astype(np.float32), op, q.ndim)).astype(dtype)


def _cast(out_t: Attribute, x: np.ndarray, dtype) -> np.ndarray:
    if out_t == bf16:  # the f32 value, rounded to nearest even
        return x.astype(np.float32).astype(ml_dtypes.bfloat16).astype(dtype)
    return x.astype(np.float32).astype(dtype)  # bf16 -> f32 exact, i32 -> f32 rounded


def evaluate_op(op: loom.LoomComputeOp, args: list[np.ndarray], dtype=np.float64) -> np.ndarray:
    """The value of `op` on `args`: floats in `dtype`, integers exact in int64 (wrapped as
    i32 wraps), quantize and dequantize in f32 as the kernel computes them."""
    a = [np.asarray(x, dtype=domain(v.type.get_element_type(), dtype)) for x, v in zip(args, op.ins)]
    out_t = op.output_type.get_element_type()
    if isinstance(op, loom.MatmulOp):
        value = np.matmul(a[0], a[1])
    elif isinstance(op, loom.Conv2DOp):
        conv = conv2d_nchw if op.layout_name() == "nchw" else conv2d_nhwc
        value = conv(a[0], unpack_filter(a[1]) if op.filter_panel() else a[1], *op.conv_params(), op.group_count())
    elif isinstance(op, loom.MaxPool2DOp):
        value = pool2d(a[0], *op.pool_params(), op.layout_name() == "nhwc")
    elif isinstance(op, loom.AvgPool2DOp):
        value = pool2d(a[0], *op.pool_params(), op.layout_name() == "nhwc", True, op.counts_padding())
    elif isinstance(op, loom.MeanOp):
        value = np.mean(a[0], axis=op.reduced(a[0].ndim), keepdims=True)
    elif isinstance(op, loom.WinogradFilterOp):
        value = winograd_filter(a[0], op.tile_size())
    elif isinstance(op, loom.WinogradInputOp):
        value = winograd_input(a[0], op.tile_size(), op.pad())
    elif isinstance(op, loom.WinogradOutputOp):
        value = winograd_output(a[0], op.tile_size(), op.output_type.get_shape())
    elif isinstance(op, loom.AddOp):
        value = a[0] + a[1]
    elif isinstance(op, loom.MulOp):
        value = a[0] * a[1]
    elif isinstance(op, loom.ReluOp):
        value = np.maximum(a[0], a[0].dtype.type(0))
    elif isinstance(op, loom.ClampOp):
        lo, hi = op.bounds()
        value = np.clip(a[0], a[0].dtype.type(lo), a[0].dtype.type(hi))
    elif isinstance(op, loom.CastOp):
        value = _cast(out_t, a[0], dtype)
    elif isinstance(op, loom.QuantizeOp):
        value = _quantize(op, *a)
    elif isinstance(op, loom.DequantizeOp):
        value = _dequantize(op, *a, dtype)
    else:
        raise LoomError(f"no reference for '{op.name}'", op)
    return _wrap_i32(value) if out_t == i32 else value


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
        with np.errstate(invalid="ignore"):  # (a NaN in a bf16 array warns as it converts)
            env[arg] = np.asarray(arr, dtype=domain(arg.type.get_element_type(), dtype))
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
    """Floating-point operations of one call: 2 per multiply-add, 1 per elementwise op. A
    Winograd convolution counts as the direct convolution it computes (the convention of
    the fast algorithms' literature: effective GFLOP/s), its transforms as nothing."""
    total = 0
    for op in _compute_ops(fn):
        out = int(np.prod(op.output_type.get_shape()))
        if isinstance(op, loom.WinogradOp):
            continue
        if isinstance(op, loom.MatmulOp) and (conv := _winograd_output(op)) is not None:
            total += 2 * int(np.prod(conv.output_type.get_shape())) * 9 * op.ins[0].type.get_shape()[-1]
        elif isinstance(op, loom.MatmulOp):
            total += 2 * out * op.ins[0].type.get_shape()[-1]
        elif isinstance(op, loom.Conv2DOp):
            c, r, s = op.window()
            total += 2 * out * c * r * s
        elif isinstance(op, loom.Pool2DOp):
            (r, s), _, _ = op.pool_params()
            total += out * r * s
        elif isinstance(op, loom.MeanOp):
            total += int(np.prod(op.ins[0].type.get_shape())) + out
        else:
            total += out
    return total


def _winograd_output(matmul: loom.MatmulOp) -> loom.WinogradOutputOp | None:
    """The output transform of a Winograd convolution whose products `matmul` computes (its
    lhs an input transform's, on tensors), or None."""
    if matmul.is_bufferized or not isinstance(matmul.ins[0].owner, loom.WinogradInputOp):
        return None
    return next((u.operation for u in matmul.res[0].uses if isinstance(u.operation, loom.WinogradOutputOp)), None)


def rounds_to_integers(fn: func.FuncOp) -> bool:
    """Whether `fn` quantizes: an integer result may then be one step from the float64
    reference's, where a float computed with rounding falls near a half."""
    return any(isinstance(op, loom.QuantizeOp) for op in _compute_ops(fn))


def reduction_length(fn: func.FuncOp) -> float:
    """The longest chain of accumulations into one output value (K for matmul, C*R*S for
    conv2d; chained ops add up), for the error bound of about 4*K*eps*max|ref|; times
    Winograd's growth where a function has its ops (`winograd_growth`)."""
    total, tiles = 0, set()
    for op in _compute_ops(fn):
        if isinstance(op, loom.MatmulOp):
            total += op.ins[0].type.get_shape()[-1]
        elif isinstance(op, loom.Conv2DOp):
            c, r, s = op.window()
            total += c * r * s
        elif isinstance(op, loom.AvgPool2DOp):  # the sum, then the scale
            (r, s), _, _ = op.pool_params()
            total += r * s + 1
        elif isinstance(op, loom.MeanOp):
            shape = op.ins[0].type.get_shape()
            total += int(np.prod([shape[d] for d in op.reduced(len(shape))])) + 1
        elif isinstance(op, loom.WinogradOp):  # two passes of the transform, alpha terms each
            total += 2 * winograd.points(op.tile_size())
            tiles.add(op.tile_size())
        else:
            total += 1
    return max(total, 1) * max((winograd_growth(m) for m in tiles), default=1)
