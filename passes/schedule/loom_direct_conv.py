"""loom-direct-conv{op=TAG}: a conv2d nest -> a direct convolution: an implicit matmul
that reads every window of the input in place, with no patch matrix.

    for f, p, (c, r, s):   Y'[f, p] += W[f, c, r, s] * Xq[c, r, s, p]

"Reuse in convolution": each input value loaded into a vector register serves the MR
output channels of the register tile (their filter values broadcast), each filter value
the NR output pixels of it, and the C*R*S window taps are rows of an implicit matrix
B[k, p] that is never written: the default schedule packs only the filter (A: panels of
MR output channels, F/MR x C*R*S x MR, loom-pack) and loads the taps straight from the
input, NR consecutive pixels at a time.

For the taps of one row of pixels to be consecutive addresses whatever the padding and
the strides, X is first staged (nests tagged "direct.pad") into planes, one per channel
and phase pair (a, b) of the strides, with its zero border written:

    Xq[n, c, a, b, i*Wq + j] = Xpad[n, c, i*sh + a, j*sw + b]      (N x C x sh x sw x Hq*Wq)

Hq = Ho + (R-1)*dh floordiv sh rows of Wq = Wo + (S-1)*dw floordiv sw columns. Tap
(r, s) of output pixel (oh, ow) is then Xq[n, c, (r*dh) mod sh, (s*dw) mod sw,
p + ((r*dh) floordiv sh)*Wq + (s*dw) floordiv sw] with p = oh*Wq + ow: one flat index p
walks the output pixels row after row, unit stride, so a vector of NR pixels is one load.
The Wq - Wo columns past each output row (the window's overhang) are computed and thrown
away: p runs over (Ho-1)*Wq + Wo columns into a buffer Y' (N x F x that), which a copy
(nest "direct.out") moves into Y; then the zero fill of Y (the `conv2d.init` nest right
before, when there is one) zeroes Y' instead, and the copy overwrites Y; otherwise the
copy adds Y' to Y. Without padding or strides X is its own staging (a view of it); with
Wq = Wo (a 1x1 window) Y is its own Y' (a view of it): a 1x1 stride-1 conv is a plain
matmul on the tensors as they are.

The matmul nest is the textbook (b,) i, j, k nest, tagged "matmul", with A = W as
F x C*R*S (a view, repeated over the batch with stride 0), C = Y' as F x P, and B's
subscripts the expressions above of k = (c*R + r)*S + s (floordiv and mod by R*S and S):
they are not linear in k, which is why loom-pack cannot copy B (and loom-default does not
ask it to), and linear in j with coefficient 1, which is what loom-vectorize needs.

NCHW only (an NHWC conv2d is left to loom-im2col). Refused with a LoomError at the nest,
nothing changed, when `op=` names it: a nest that is not the textbook conv2d
(`loom_im2col.match_conv2d` says why), an NHWC nest. Without `op=`, other nests are
skipped with a remark. Each rewrite is a remark with the staged planes' size and the
share of computed columns thrown away.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from compiler.diagnostics import LoomError
from compiler.remarks import remark
from passes.analysis.loop_utils import nest_tag, perfect_band, select_nests
from passes.conversion.convert_loom_to_affine import build_nest, matmul_nest, zero_nest
from passes.schedule.loom_im2col import Conv2DNest, bordered, contiguous, match_conv2d, matrix_view


@dataclass(frozen=True)
class Geometry:
    """The planes' rows and columns and the computed columns of a direct convolution."""

    hq: int
    wq: int

    @staticmethod
    def of(conv: Conv2DNest) -> Geometry:
        (sh, sw), (dh, dw) = conv.strides, conv.dilations
        return Geometry(conv.ho + (conv.r - 1) * dh // sh, conv.wo + (conv.s - 1) * dw // sw)

    def columns(self, conv: Conv2DNest) -> int:
        """P: the flat pixel index's extent, each output row's Wq - Wo overhang included
        (but the last row's)."""
        return (conv.ho - 1) * self.wq + conv.wo

    def staged(self, conv: Conv2DNest) -> bool:
        """Whether X is copied into planes (else it is viewed as one plane per channel)."""
        return conv.padding != (0, 0) or conv.strides != (1, 1) or not contiguous(conv.x.type)

    def plane_elements(self, conv: Conv2DNest) -> int:
        """Elements of the staged input (0 when X is its own staging)."""
        sh, sw = conv.strides
        return conv.n * conv.c * sh * sw * self.hq * self.wq if self.staged(conv) else 0

    def wasted(self, conv: Conv2DNest) -> float:
        """The share of the computed columns thrown away."""
        return 1 - conv.ho * conv.wo / self.columns(conv)


def _split(e: AffineExpr, by: int, scale: int = 1) -> tuple[AffineExpr, AffineExpr]:
    """((e*scale) mod by, (e*scale) floordiv by), folded where `by` divides `scale` (a
    stride of 1, a dilation that is a multiple of the stride: one phase)."""
    if scale % by == 0:
        return AffineExpr.constant(0), e * (scale // by) if scale != by else e
    return (e * scale) % by, (e * scale) // by


def window_subscripts(conv: Conv2DNest, geometry: Geometry, batched: bool) -> list[AffineExpr]:
    """B's subscripts into the staged planes, expressions of the matmul nest's ivs
    ((b,) i, j, k): k = (c*R + r)*S + s is split back into its tap."""
    (sh, sw), (dh, dw) = conv.strides, conv.dilations
    nb = 1 if batched else 0
    j, k = AffineExpr.dimension(nb + 1), AffineExpr.dimension(nb + 2)
    rs = conv.r * conv.s
    c = k // rs if rs > 1 else k
    tap = k % rs if rs > 1 else AffineExpr.constant(0)
    r = tap // conv.s if conv.s > 1 else tap
    s = k % conv.s if conv.s > 1 else AffineExpr.constant(0)
    a, row = _split(r, sh, dh)
    b, column = _split(s, sw, dw)
    n = AffineExpr.dimension(0) if batched else AffineExpr.constant(0)
    return [n, c, a, b, j + row * geometry.wq + column]


def staged_planes(conv: Conv2DNest, geometry: Geometry) -> tuple[list[Operation], SSAValue]:
    """X with its zero border, in the planes of `Geometry` (the module docstring); the
    copy covers the rows and columns some window reads."""
    (sh, sw), (ph, pw) = conv.strides, conv.padding
    hq, wq = geometry.hq, geometry.wq
    d = [AffineExpr.dimension(i) for i in range(4)]
    a, i = _split(d[2] + ph, sh)
    b, j = _split(d[3] + pw, sw)
    extents = [conv.n, conv.c, min(conv.h, hq * sh - ph), min(conv.width, wq * sw - pw)]
    return bordered(conv.x, [conv.n, conv.c, sh, sw, hq * wq], (d[0], d[1], a, b, i * wq + j), "x_planes",
                    ["n", "c", "h", "w"], "direct.pad", extents)


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


def rewrite(conv: Conv2DNest) -> str:
    """Replace the nest; returns the remark."""
    nest = conv.nest
    block = nest.parent_block()
    assert block is not None
    geometry = Geometry.of(conv)
    element = conv.y.type.get_element_type()
    bytes_ = element.bitwidth // 8
    k, p = conv.c * conv.r * conv.s, geometry.columns(conv)
    batched = conv.n > 1
    batch = [conv.n] if batched else []
    ops: list[Operation] = []
    after: list[Operation] = []
    if geometry.staged(conv):
        ops, planes = staged_planes(conv, geometry)
        after.append(memref.DeallocOp.get(planes))
        how = (f"X staged as {conv.n}x{conv.c}x{conv.strides[0]}x{conv.strides[1]} planes of "
               f"{geometry.hq}x{geometry.wq} with its zero border "
               f"({geometry.plane_elements(conv) * bytes_ // 1024} KiB, nests 'direct.pad')")
    else:
        planes = matrix_view(conv.x, [conv.n, conv.c, 1, 1, conv.h * conv.width],
                             [conv.c * conv.h * conv.width, conv.h * conv.width, 0, 0, 1]).results[0]
        ops.append(planes.owner)
        planes.name_hint = "x_planes"
        how = "X read in place (no padding, stride 1)"
    wide = geometry.wq != conv.wo
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
        how += (f"; Y computed as {conv.f}x{p} per image ({geometry.wasted(conv):.1%} of the columns are the "
                f"windows' overhang, thrown away), then copied into Y (nest 'direct.out')")
    else:
        c_source = conv.y
        init = None
    a = matrix_view(conv.w, [*batch, conv.f, k], [0, k, 1] if batched else [k, 1])
    c = matrix_view(c_source, [*batch, conv.f, p], [conv.f * p, p, 1] if batched else [p, 1])
    a.results[0].name_hint, c.results[0].name_hint = "w_mat", "y_mat"
    ops += [a, c, *matmul_nest(a.results[0], planes, c.results[0], window_subscripts(conv, geometry, batched))]
    if wide:
        ops += _out_nest(conv, geometry, c_source, accumulate=init is None)
        after.append(memref.DeallocOp.get(c_source))
    for op in [*ops, *after]:
        for inner in op.walk():
            inner.location = nest.location
    block.insert_ops_before(ops, nest)
    block.insert_ops_after(after, nest)
    block.erase_op(nest)
    shape = f"{conv.f}x{p}x{k}" + (f", batched over {conv.n}" if batched else "")
    return (f"nest 'conv2d' {conv.describe()}: direct convolution: {how}; then an implicit matmul {shape} "
            f"(W as {conv.f}x{k}, B's {k} rows the window taps read from the planes, no patch matrix)")


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
        total = arith.AddfOp(old, value)
        return [value, old, total, affine.StoreOp(total.result, conv.y, ivs, same)]

    return build_nest([conv.n, conv.f, conv.ho, conv.wo], "direct.out", body, ["n", "f", "oh", "ow"])


def reads_windows(nest: affine.ForOp) -> bool:
    """Whether a matmul nest is loom-direct-conv's: its B read through subscripts that
    are not linear in k (B is then not a matrix a copy could pack)."""
    from passes.analysis.affine_forms import map_forms

    loads = [o for o in nest.walk() if isinstance(o, affine.LoadOp)]
    return len(loads) >= 2 and any(f is None for f in map_forms(loads[1].map.data, loads[1].indices))


def direct_supported(conv: Conv2DNest) -> str | None:
    """Why loom-direct-conv cannot take the conv (None: it can)."""
    if conv.layout != "nchw":
        return "an NHWC conv2d (the direct convolution is built for NCHW; loom-im2col takes NHWC)"
    return None


@dataclass(frozen=True)
class LoomDirectConvPass(ModulePass):
    name = "loom-direct-conv"

    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        nests = select_nests(op, self.op, self.name)
        found = []
        for nest in nests:
            conv = match_conv2d(nest)
            if isinstance(conv, Conv2DNest) and (why := direct_supported(conv)) is not None:
                conv = why
            found.append((nest, conv))
        if self.op is not None:
            for nest, conv in found:
                if isinstance(conv, str):
                    raise LoomError(f"{self.name}: cannot rewrite nest '{nest_tag(nest) or 'untagged'}': {conv}", nest)
        elif not any(isinstance(conv, Conv2DNest) for _, conv in found):
            seven = [(n, c) for n, c in found if len(perfect_band(n)) == 7]
            why = ("; ".join(f"nest '{nest_tag(n) or 'untagged'}': {c}" for n, c in seven) if seven
                   else "no nest has the 7 loops of conv2d's n, f, oh, ow, c, r, s")
            raise LoomError(f"{self.name}: no conv2d nest to rewrite: {why}", (seven or found)[0][0] if found else None)
        for nest, conv in found:
            if isinstance(conv, str):
                remark(self.name, nest, f"nest '{nest_tag(nest) or 'untagged'}' skipped: {conv}")
            else:
                remark(self.name, nest, rewrite(conv))
