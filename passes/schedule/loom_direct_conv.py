"""loom-direct-conv{op=TAG}: a conv2d nest -> a direct convolution: an implicit matmul
that reads every window of the input in place, with no patch matrix.

    NCHW   for f, p, (c, r, s):   Y'[f, p] += W[f, c, r, s] * Xq[c, r, s, p]
    NHWC   for p, f, (r, s, c):   Y[p, f]  += Xq[p, r, s, c] * W[r, s, c, f]

"Reuse in convolution": each input value loaded into a register serves every output
channel of the register tile, each filter value every output pixel of it, and the
C*R*S window taps are the k of an implicit matrix that is never written. The default
schedule packs only the filter (NCHW: A, in panels of MR output channels, F/MR x C*R*S
x MR; NHWC: B, in panels of NR) and reads the windows in place.

X is first staged (nests tagged "direct.pad") with its zero border written, so that no
read needs a guard and a window row's taps are at constant offsets from a pixel's:

    NCHW   Xq[n, c, a, b, i*Wq + j]        = Xpad[n, c, i*sh + a, j*sw + b]
    NHWC   Xq[n, a, (i*Wq*sw + w)*C + c]   = Xpad[n, i*sh + a, w, c]

planes of Hq = Ho + (R-1)*dh floordiv sh rows of Wq = Wo + (S-1)*dw floordiv sw columns
per phase (a, b) of the strides (NHWC keeps a row's column phases side by side, so that
tap (r, s) is at `((oh + (r*dh) floordiv sh)*Wq + ow)*sw*C + s*dw*C + c` in plane
(r*dh) mod sh: a window row's S*C taps are one run).

NCHW: the output pixels are the vector dimension, so a vector of NR pixels must be
consecutive addresses of every tap: one flat index p = oh*Wq + ow walks them row after
row, tap (r, s) at `p + ((r*dh) floordiv sh)*Wq + (s*dw) floordiv sw` in plane
(c, (r*dh) mod sh, (s*dw) mod sw). The Wq - Wo columns past each output row (the
window's overhang) are computed and thrown away: p runs over (Ho-1)*Wq + Wo pixels into
a buffer Y' (N x F x that), which a copy (nest "direct.out") moves into Y; then the zero
fill of Y (the `conv2d.init` nest right before, when there is one) zeroes Y' instead,
and the copy overwrites Y; otherwise it adds Y' to Y. With Wq = Wo (a 1x1 window) Y is
its own Y'. k = (c*R + r)*S + s: B's subscripts take floordiv and mod of k by R*S and
S (a few integer instructions per k step beside MR*NR/w fmas; unrolling k by the taps
of a window row, which turns them into constant offsets, measured no faster, and
slower with a stride: 85 -> 56 GFLOP/s on a stride-2 3x3 C128 layer).

NHWC: the output pixels are the rows, each a broadcast whose address is computed once
per register tile, so p may be any function of the row: p = (n, oh, ow) with the batch
folded in, nothing computed twice, Y written in place (no Y', no copy). k = (r*S + s)*C
+ c: one floordiv and one mod by S*C per k. With the filter in panels of NR output
channels (rank 5, `loom.conv2d`'s P x R x S x C x NR), one matmul per panel, batched:

    for b, p, f, (r, s, c):   Y[p, b*NR + f] += Xq[p, r, s, c] * Wp[b, (r, s, c), f]

B a panel (K x NR, contiguous: the schedule reads it in place, packing nothing), C its
NR columns of Y (a view P x (N*Ho*Wo) x NR, rows F apart), A the same windows for every b.

Without padding or strides X is its own staging (a view of it), and so it is for an NHWC
1x1 window with equal strides and no padding (a projection: `strided_in_place`), whose
windows are C elements each where they lie. A 1x1 stride-1 conv is a plain matmul on the
tensors as they are.

Low precision (bf16, i8 or ui8 elements widened to f32 or i32 as the nest reads them):
the planes hold X's own elements, Y' Y's; the implicit matmul widens each element as it
reads it, as the conv2d nest did (loom-pack widens the filter once as it packs it).

`group=G` (default 0: none): an NHWC conv whose C is not a multiple of G (the 3-channel
stem) gets its planes' channels rounded up to whole groups, the added ones zero, and its
filter copied into an R x S x Cp x F buffer with zeros in their rows, so that a window
row's S*Cp taps are whole groups that a dot-product instruction reads in place (loom-dot)
at (Cp - C)/C more products: bf16 7x7/2 stem at batch 8, znver4, one thread, 1.64 ms per
image through im2col (its patch matrix written and packed), 1.40 so, with a third more
products.

Refused with a LoomError at the nest, nothing changed, when `op=` names it: a nest that
is not the textbook conv2d (`loom_im2col.match_conv2d` says why). Without `op=`, other
nests are skipped with a remark. Each rewrite is a remark with the staged planes' size
and the share of computed pixels thrown away.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import AffineMapAttr, IntegerType, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineConstantExpr, AffineExpr, AffineMap
from xdsl.passes import ModulePass

from dialects.layout import contiguous, strided_view
from passes.analysis.affine_forms import map_forms
from passes.analysis.loop_utils import nest_tag, perfect_band, raise_problems
from passes.conversion.convert_loom_to_affine import build_nest, matmul_nest, zero_nest
from passes.schedule.loom_im2col import (
    Conv2DNest,
    bordered,
    replace_nest,
    rewrite_conv2d_nests,
)


def strided_in_place(conv: Conv2DNest) -> bool:
    """An NHWC 1x1 conv with equal strides and no padding (ResNet's projections): each
    window is C elements of X where they lie, X[n, oh*s, ow*s, :], so X is read in place
    with no planes (staged, the planes held all of X, to read a quarter of it at stride 2:
    1x1/2 C64 -> 128 56^2, znver4, one thread, f32 batch 1 0.156 -> 0.123 ms, bf16 batch 8
    0.73 -> 0.48)."""
    return (conv.layout == "nhwc" and (conv.r, conv.s) == (1, 1) and conv.padding == (0, 0)
            and conv.strides[0] == conv.strides[1] and contiguous(conv.x.type))


@dataclass(frozen=True)
class Geometry:
    """The planes' rows and columns and the computed columns of a direct convolution."""

    hq: int
    wq: int

    @staticmethod
    def of(conv: Conv2DNest) -> Geometry:
        (sh, sw), (dh, dw) = conv.strides, conv.dilations
        if strided_in_place(conv):  # X itself, a plane row every sh input rows
            return Geometry(conv.ho, conv.width)
        return Geometry(conv.ho + (conv.r - 1) * dh // sh, conv.wo + (conv.s - 1) * dw // sw)

    def columns(self, conv: Conv2DNest) -> int:
        """The pixels computed per image: NCHW, the flat pixel index's extent, each output
        row's Wq - Wo overhang included (but the last row's); NHWC, Ho*Wo."""
        return conv.ho * conv.wo if conv.layout == "nhwc" else (conv.ho - 1) * self.wq + conv.wo

    def staged(self, conv: Conv2DNest) -> bool:
        """Whether X is copied into planes (else it is viewed as one plane per channel)."""
        return (conv.padding != (0, 0) or conv.strides != (1, 1) or not contiguous(conv.x.type)) and \
            not strided_in_place(conv)

    def plane_elements(self, conv: Conv2DNest) -> int:
        """Elements of the staged input, where X is staged."""
        sh, sw = conv.strides
        return conv.n * conv.c * sh * sw * self.hq * self.wq

    def wasted(self, conv: Conv2DNest) -> float:
        """The share of the computed pixels thrown away (NCHW: each row's overhang)."""
        return 1 - conv.ho * conv.wo / self.columns(conv)


def _split(e: AffineExpr, by: int, scale: int = 1) -> tuple[AffineExpr, AffineExpr]:
    """((e*scale) mod by, (e*scale) floordiv by), folded where `by` divides `scale` (a
    stride of 1, a dilation that is a multiple of the stride: one phase)."""
    if scale % by == 0:
        return AffineExpr.constant(0), e * (scale // by) if scale != by else e
    return (e * scale) % by, (e * scale) // by


def _divmod(e: AffineExpr, by: int) -> tuple[AffineExpr, AffineExpr]:
    """(e floordiv by, e mod by), folded for by = 1."""
    return (e, AffineExpr.constant(0)) if by == 1 else (e // by, e % by)


def matmul_shape(conv: Conv2DNest) -> tuple[int, int, int]:
    """(M, N, K) of the implicit matmul, per image in NCHW (the flat pixels, each row's
    overhang included, as N), of all images in NHWC (their pixels as M)."""
    k, p = conv.c * conv.r * conv.s, Geometry.of(conv).columns(conv)
    return (conv.n * p, conv.f, k) if conv.layout == "nhwc" else (conv.f, p, k)


def window_subscripts(conv: Conv2DNest, geometry: Geometry, batched: bool) -> list[AffineExpr]:
    """The implicit operand's subscripts into the staged planes, expressions of the
    matmul nest's ivs ((b,) i, j, k), k split back into its tap: NCHW, B[k, j] with
    k = (c*R + r)*S + s and j the flat pixel; NHWC, A[i, k] with k = (r*S + s)*C + c
    and i the flat pixel. NHWC with a filter in panels: b is the panel, which A's
    subscripts do not read."""
    (sh, sw), (dh, dw) = conv.strides, conv.dilations
    nb = 1 if batched or conv.panel else 0
    i, j, k = (AffineExpr.dimension(nb + x) for x in range(3))
    n = AffineExpr.dimension(0) if batched else AffineExpr.constant(0)
    if conv.layout == "nhwc":  # i: n, oh, ow; a window row's taps (s, c) are one run
        assert not batched, "an NHWC direct convolution folds the batch into the rows"
        n, pixel = _divmod(i, conv.ho * conv.wo) if conv.n > 1 else (AffineExpr.constant(0), i)
        oh, ow = _divmod(pixel, conv.wo)
        r, run = _divmod(k, conv.s * conv.c)
        if dw > 1 and conv.s > 1:  # the run's taps are dw*C apart
            tap, c = _divmod(k, conv.c)
            run = tap % conv.s * (dw * conv.c) + c
        a, row = _split(r, sh, dh)
        return [n, a, ((oh + row) * geometry.wq + ow) * (sw * conv.c) + run]
    c, tap = _divmod(k, conv.r * conv.s)
    r = _divmod(tap, conv.s)[0]
    s = _divmod(k, conv.s)[1]  # k mod S, not (k mod R*S) mod S: the same, in fewer instructions
    a, row = _split(r, sh, dh)
    b, column = _split(s, sw, dw)
    return [n, c, a, b, j + row * geometry.wq + column]


def staged_planes(conv: Conv2DNest, geometry: Geometry, channels: int = 0) -> tuple[list[Operation], SSAValue]:
    """X with its zero border, in the planes of `Geometry` (the module docstring); the
    copy covers the rows and columns some window reads. NHWC `channels`: the planes'
    channels where more than X's (C rounded up to whole groups, the others zero)."""
    (sh, sw), (ph, pw) = conv.strides, conv.padding
    hq, wq = geometry.hq, geometry.wq
    d = [AffineExpr.dimension(i) for i in range(4)]
    rows, cols = min(conv.h, hq * sh - ph), min(conv.width, wq * sw - pw)
    if conv.layout == "nhwc":  # [n, a, (i*Wq*sw + w)*C + c]: a row's column phases side by side
        a, i = _split(d[1] + ph, sh)
        cp = channels or conv.c
        return bordered(conv.x, [conv.n, sh, hq * wq * sw * cp], (d[0], a, ((i * wq) * sw + d[2] + pw) * cp + d[3]),
                        "x_planes", ["n", "h", "w", "c"], "direct.pad", [conv.n, rows, cols, conv.c])
    a, i = _split(d[2] + ph, sh)
    b, j = _split(d[3] + pw, sw)
    return bordered(conv.x, [conv.n, conv.c, sh, sw, hq * wq], (d[0], d[1], a, b, i * wq + j), "x_planes",
                    ["n", "c", "h", "w"], "direct.pad", [conv.n, conv.c, rows, cols])


def _zero_fill_before(conv: Conv2DNest) -> affine.ForOp | None:
    """The nest right before the conv that zeroes Y (convert-loom-to-affine's
    `conv2d.init`), if there is one."""
    before = conv.nest.prev_op
    if not isinstance(before, affine.ForOp) or nest_tag(before) != "conv2d.init":
        return None
    stores = [o for o in before.walk() if isinstance(o, affine.StoreOp)]
    zero = all(o.memref is conv.y and isinstance(c := o.value.owner, arith.ConstantOp)
               and c.value.value.data == 0.0 for o in stores)
    return before if stores and zero and len(perfect_band(before)) == 4 else None


def padded_channels(conv: Conv2DNest, group: int) -> int:
    """C rounded up to whole groups of `group` where an NHWC conv's C is not (0 where
    it is, or for NCHW, a filter in panels or no group): its windows then read in
    groups from planes with zero channels added, at (padded - C)/C more products."""
    if not group or conv.layout != "nhwc" or conv.panel or conv.c % group == 0:
        return 0
    return -(-conv.c // group) * group


def rewrite(conv: Conv2DNest, group: int = 0) -> str:
    """Replace the nest; returns the remark. `group`: an NHWC conv whose C is not whole
    groups of it gets C rounded up (`padded_channels`)."""
    channels = padded_channels(conv, group)
    original, conv = conv, replace(conv, c=channels) if channels else conv
    geometry = Geometry.of(conv)
    nhwc = conv.layout == "nhwc"
    element = conv.y.type.get_element_type()
    rows, cols, k = matmul_shape(conv)
    p = geometry.columns(conv)
    batched = conv.n > 1 and not nhwc  # NHWC: the batch folded into the rows
    batch = [conv.n] if batched else []
    ops: list[Operation] = []
    after: list[Operation] = []
    w_source = conv.w
    if channels:  # W in a zeroed R x S x Cp x F buffer: the added channels' rows are zeros
        ops, w_source = bordered(conv.w, [conv.r, conv.s, channels, conv.f],
                                 tuple(AffineExpr.dimension(i) for i in range(4)), "w_padded", ["r", "s", "c", "f"],
                                 "direct.pad")
        after.append(memref.DeallocOp.get(w_source))
    if geometry.staged(conv) or channels:
        staging, planes = staged_planes(original, geometry, channels)
        ops += staging
        after.append(memref.DeallocOp.get(planes))
        sh, sw = conv.strides
        how = (f"X staged as {conv.n}x{sh} planes of {geometry.hq}x{geometry.wq * sw}x{conv.c}" if nhwc else
               f"X staged as {conv.n}x{conv.c}x{sh}x{sw} planes of {geometry.hq}x{geometry.wq}") + (
               " with its zero border "
               f"({geometry.plane_elements(conv) * conv.x.type.get_element_type().bitwidth // 8 // 1024} KiB, "
               "nests 'direct.pad')")
        if channels:
            how += (f", its {original.c} channels padded with zeros to {channels} (whole groups of {group}), and "
                    f"W copied into a {conv.r}x{conv.s}x{channels}x{conv.f} buffer with zeros in the added channels")
    else:
        plane = conv.h * conv.width
        shape, strides = (([conv.n, 1, plane * conv.c], [plane * conv.c, 0, 1]) if nhwc else
                          ([conv.n, conv.c, 1, 1, plane], [conv.c * plane, plane, 0, 0, 1]))
        planes = strided_view(conv.x, shape, strides).results[0]
        ops.append(planes.owner)
        planes.name_hint = "x_planes"
        how = ("X read in place (no padding, stride 1)" if conv.strides == (1, 1) else
               f"X read in place (a 1x1 window, no padding: each window the {conv.c} channels of X[n, "
               f"oh*{conv.strides[0]}, ow*{conv.strides[1]}] where they lie)")
    wide = geometry.wq != conv.wo and not nhwc
    if wide:
        out = memref.AllocOp.get(element, 64, [conv.n, conv.f, p])
        out.memref.name_hint = "y_wide"
        ops.append(out)
        init = _zero_fill_before(conv)
        ops += zero_nest(out.memref, "conv2d.init")
        if init is not None:
            zero = next(o for o in init.walk() if isinstance(o, affine.StoreOp)).value.owner
            init.detach()
            init.erase()
            if not zero.results[0].uses:
                zero.detach()
                zero.erase()
        c_source = out.memref
        how += (f"; Y computed as {p} pixels per image ({geometry.wasted(conv):.1%} of them the windows' overhang, "
                f"thrown away), then copied into Y (nest 'direct.out')")
    else:
        c_source = conv.y
        init = None
    b_at = None
    if conv.panel:  # a matmul per panel, batched: B the panel (K x NR, contiguous), C its NR columns of Y
        nr, g = conv.panel, conv.group
        if g:  # B[k, j] at [k floordiv G, j*G + k mod G] of the panel's K/G x NR*G
            w = strided_view(conv.w, [conv.f // nr, k // g, nr * g], [k * nr, nr * g, 1])
            b, _, j, kd = (AffineExpr.dimension(x) for x in range(4))
            b_at = [b, kd // g, j * g + kd % g]
        else:
            w = strided_view(conv.w, [conv.f // nr, k, nr], [k * nr, nr, 1])
        c = strided_view(c_source, [conv.f // nr, rows, nr], [nr, cols, 1])
    else:
        w_shape = [k, conv.f] if nhwc else [conv.f, k]  # W repeated over the batch (stride 0)
        w = strided_view(w_source, [*batch, *w_shape], [0, w_shape[1], 1] if batched else [w_shape[1], 1])
        c = strided_view(c_source, [*batch, rows, cols], [rows * cols, cols, 1] if batched else [cols, 1])
    w.results[0].name_hint, c.results[0].name_hint = "w_mat", "y_mat"
    windows = window_subscripts(conv, geometry, batched)
    if nhwc:  # the windows are A (rows: pixels), W is B
        nest_ops = matmul_nest(planes, w.results[0], c.results[0], a_at=windows, b_at=b_at, k=k)
    else:  # W is A, the windows are B (columns: pixels)
        nest_ops = matmul_nest(w.results[0], planes, c.results[0], b_at=windows)
    ops += [w, c, *nest_ops]
    if wide:
        ops += _out_nest(conv, geometry, c_source, accumulate=init is None)
        after.append(memref.DeallocOp.get(c_source))
    replace_nest(original.nest, ops, after)
    shape = (f"{rows}x{conv.panel}x{k} per panel of the filter, batched over its {conv.f // conv.panel}" if conv.panel
             else f"{rows}x{cols}x{k}" + (f", batched over {conv.n}" if batched else ""))
    if nhwc:
        b = f"B a panel of W, {k}x{conv.panel}" if conv.panel else f"W as {k}x{conv.f}"
        b += f" in groups of {conv.group} along k" if conv.group else ""
        operands = f"A's {rows} rows the windows read from the planes, {b}"
    else:
        operands = f"W as {conv.f}x{k}, B's {k} rows the window taps read from the planes"
    return (f"nest 'conv2d' {original.describe()}: direct convolution: {how}; then an implicit matmul {shape} "
            f"({operands}, no patch matrix)")


def _out_nest(conv: Conv2DNest, geometry: Geometry, wide: SSAValue, accumulate: bool) -> list[Operation]:
    """Y[n, f, oh, ow] = Y'[n, f, oh*Wq + ow] (+= when Y was not zeroed right before)."""
    element = conv.y.type.get_element_type()
    n, f, oh, ow = (AffineExpr.dimension(i) for i in range(4))
    at = AffineMapAttr(AffineMap(4, 0, (n, f, oh * geometry.wq + ow)))
    same = AffineMapAttr(AffineMap.identity(4))

    def body(ivs: list[SSAValue]) -> list[Operation]:
        value = affine.LoadOp(wide, ivs, at, element)
        if not accumulate:
            return [value, affine.StoreOp(value.result, conv.y, ivs, same)]
        old = affine.LoadOp(conv.y, ivs, same, element)
        total = (arith.AddiOp if isinstance(element, IntegerType) else arith.AddfOp)(old, value)
        return [value, old, total, affine.StoreOp(total.result, conv.y, ivs, same)]

    return build_nest([conv.n, conv.f, conv.ho, conv.wo], "direct.out", body, ["n", "f", "oh", "ow"])


def windows_operand(nest: affine.ForOp) -> str:
    """Which operand of a matmul nest loom-direct-conv made implicit: "A" (NHWC), "B"
    (NCHW) or "" (a plain matmul): the one read through subscripts that are not linear
    in k, which a copy cannot pack."""
    loads = [o for o in nest.walk() if isinstance(o, affine.LoadOp)][:2]
    for name, load in zip("AB", loads):
        if any(f is None for f in map_forms(load.map.data, load.indices)):
            return name
    return ""


def window_run(nest: affine.ForOp) -> int:
    """The run of k that A's subscripts divide k by in a matmul nest whose A is a direct
    convolution's windows (NHWC): S*C, a window row's taps, after which the read jumps to
    the next tap row; 0 where A's reads do not divide k (a 1x1 convolution's, or a plain
    matmul's)."""
    k = perfect_band(nest)[-1].body.block.args[0]
    load = next(o for o in nest.walk() if isinstance(o, affine.LoadOp))
    m = load.map.data
    positions = [p for p, v in enumerate(load.indices) if v is k]
    dims = {AffineExpr.dimension(p) if p < m.num_dims else AffineExpr.symbol(p - m.num_dims) for p in positions}
    divisors = [e.rhs.value for r in m.results for e in r.dfs()
                if isinstance(e, AffineBinaryOpExpr) and e.kind in (AffineBinaryOpKind.FloorDiv, AffineBinaryOpKind.Mod)
                and e.lhs in dims and isinstance(e.rhs, AffineConstantExpr)]
    return min(divisors, default=0)


@dataclass(frozen=True)
class LoomDirectConvPass(ModulePass):
    name = "loom-direct-conv"

    op: str | None = None
    group: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise_problems(self.name, [
            f"option 'group' is the channels a window's group holds, 0 (none) or more, got {self.group}"
            if self.group < 0 else None])
        rewrite_conv2d_nests(op, self.op, self.name, lambda conv: rewrite(conv, self.group), panels=True)
