"""loom-im2col{op=TAG}: a conv2d nest -> an explicit patch-matrix copy and a matmul nest
(im2col, Chellapilla et al. 2006; Caffe's convolution), so that the convolution runs on
the matmul schedule.

The nest is convert-loom-to-affine's textbook conv2d (n, f, oh, ow, c, r, s with
`Y[n, f, oh, ow] += X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw] * W[f, c, r, s]`, the
read under its padding guard). It becomes, at the same place:

    %col = memref.alloc : N x C x R x S x Ho x Wo       the patch matrix, 64-byte aligned
    affine.for n, c, r, s, oh, ow {loom.tag = "im2col"}
        col[n, c, r, s, oh, ow] = X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw]  (via the staged X)
    matmul nest {loom.tag = "matmul"}                   (b,) i, j, k on views, no copy:
        Y as N x F x (Ho*Wo)  +=  W as F x (C*R*S)  @  col as N x (C*R*S) x (Ho*Wo)
    memref.dealloc %col

With padding or a column stride, X is first staged (`staged_input`): copied into a
buffer with its zero border written, its columns split by phase modulo the column stride
(`[n, c, ih, iw mod sw, iw floordiv sw]`), so that the patch copy has constant bounds and
no guard, and each window tap reads consecutive addresses along ow: it vectorizes, for
stride 2 too. The batch is the matmul's batch loop, W's view repeating it with a stride
of 0. Y's zero fill (the `conv2d.init` nest) stays as it was. A 1x1 convolution with
stride 1 and no padding needs no copy: X viewed as N x C x (H*W) is already the matrix.
Low precision (bf16, i8 or ui8 elements widened to f32 or i32 as the nest reads them):
the staged input and the patch matrix hold X's own elements (a half or a quarter of
f32's bytes to copy), and the matmul nest widens each element as it reads it, as the
conv2d nest did (loom-pack then widens once per element as it packs).

Refused with a LoomError at the nest, nothing changed, when `op=` names it: a nest that
is not the textbook conv2d (already scheduled, or another op's), W or Y not contiguous
(their views need it; X may have any layout, and must be contiguous only for the 1x1
case, which otherwise copies). Without `op=`, other nests are skipped with a remark.
Each rewrite is a remark with the patch matrix's size and the matmul's shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, arith, memref
from xdsl.dialects.builtin import AffineMapAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.passes import ModulePass

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from dialects import arith_ext
from dialects.layout import contiguous, strided_view
from passes.analysis.affine_forms import map_forms
from passes.analysis.loop_utils import TAG, constant_bounds, nest_tag, perfect_band, select_nests, step_of
from passes.conversion.convert_loom_to_affine import (
    build_nest,
    conv2d_guard,
    group_channel,
    matmul_nest,
    panel_subscripts,
    zero_nest,
)


@dataclass(frozen=True)
class Conv2DNest:
    """What a textbook conv2d nest computes: its memrefs and sizes."""

    nest: affine.ForOp
    x: SSAValue
    w: SSAValue
    y: SSAValue
    n: int
    f: int
    ho: int
    wo: int
    c: int
    r: int
    s: int
    h: int
    width: int
    strides: tuple[int, int]
    padding: tuple[int, int]
    dilations: tuple[int, int]
    layout: str = "nchw"
    #: NR of a filter in panels (P x R x S x C x NR, NHWC), 0 for HWCF or FCHW
    panel: int = 0
    #: G of a filter in panels of groups (P x R x S x C/G x NR x G), 0 for any other
    group: int = 0
    #: the channel groups (`loom.conv2d`'s `groups`): `c` is then one group's channels,
    #: C/groups, and X has c * groups
    groups: int = 1

    @property
    def pointwise(self) -> bool:
        """A 1x1 window, stride 1, no padding: X is already the patch matrix."""
        return (self.r, self.s, self.strides, self.padding) == (1, 1, (1, 1), (0, 0))

    @property
    def copies(self) -> bool:
        """Whether the patch matrix is a copy: not for a pointwise conv of a contiguous X."""
        return not (self.pointwise and contiguous(self.x.type))

    def describe(self) -> str:
        (sh, sw), (ph, pw), (dh, dw) = self.strides, self.padding, self.dilations
        params = f"(strides [{sh}, {sw}], padding [{ph}, {pw}], dilations [{dh}, {dw}]{self._grouping()})"
        if self.layout == "nhwc":
            p = self.f // self.panel if self.panel else 0
            w = (f"panels of groups {p}x{self.r}x{self.s}x{self.c // self.group}x{self.panel}x{self.group}"
                 if self.group else f"panels {p}x{self.r}x{self.s}x{self.c}x{self.panel}" if self.panel else
                 f"HWCF {self.r}x{self.s}x{self.c}x{self.f}")
            return (f"NHWC {self.n}x{self.h}x{self.width}x{self.c * self.groups} * {w} "
                    f"{params} -> {self.n}x{self.ho}x{self.wo}x{self.f}")
        return (f"{self.n}x{self.c * self.groups}x{self.h}x{self.width} * {self.f}x{self.c}x{self.r}x{self.s} "
                f"{params} -> {self.n}x{self.f}x{self.ho}x{self.wo}")

    def _grouping(self) -> str:
        if self.groups == 1:
            return ""
        return ", depthwise" if self.groups == self.c * self.groups == self.f else f", {self.groups} groups"


@dataclass(frozen=True)
class _Layout:
    """Where a layout's textbook nest (convert-loom-to-affine's) keeps things: its loops
    in order, the dims Y's and W's accesses use, X's row and column subscripts (positions
    in X's access) and its other two, and the dims of oh, ow, r, s."""

    loops: tuple[str, ...]
    y: tuple[int, ...]
    w: tuple[int, ...]
    rows: int
    cols: int
    x_rest: tuple[int, ...]
    x_text: str

    def dim(self, loop: str) -> int:
        return self.loops.index(loop)

    oh = property(lambda self: self.dim("oh"))
    ow = property(lambda self: self.dim("ow"))
    r = property(lambda self: self.dim("r"))
    s = property(lambda self: self.dim("s"))


_LAYOUTS = {
    "nchw": _Layout(("n", "f", "oh", "ow", "c", "r", "s"), (0, 1, 2, 3), (1, 4, 5, 6), 2, 3, (0, 4),
                    "X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw]"),
    "nhwc": _Layout(("n", "oh", "ow", "f", "r", "s", "c"), (0, 1, 2, 3), (4, 5, 6, 3), 1, 2, (0, 6),
                    "X[n, oh*sh + r*dh - ph, ow*sw + s*dw - pw, c]"),
}


#: the products and sums of a conv2d statement: in floats, or in i32 for int8 elements
_PRODUCTS = ((arith.MulfOp, arith.AddfOp), (arith.MuliOp, arith.AddiOp))


def _textbook_statement(body: list[Operation]) -> bool:
    """Whether `body` is convert-loom-to-affine's `Y += X * W`: the loads of X, W and Y,
    X's and W's elements widened to Y's type when they are low precision (bf16 to f32,
    i8/ui8 to i32, `convert_loom_to_affine.widen`), the product, the sum, the store."""
    if len(body) < 6 or not all(isinstance(o, affine.LoadOp) for o in body[:3]) or \
            not isinstance(body[-1], affine.StoreOp):
        return False
    lx, lw, ly, st = body[0], body[1], body[2], body[-1]
    factors, rest = [lx.result, lw.result], body[3:-1]
    for i, load in enumerate((lx, lw)):
        if rest and isinstance(rest[0], arith_ext.WIDENING) and rest[0].operands[0] is load.result:
            factors[i] = rest[0].results[0]
            rest = rest[1:]
    if len(rest) != 2 or (type(rest[0]), type(rest[1])) not in _PRODUCTS:
        return False
    mul, add = rest
    return (all(v.type == ly.result.type for v in factors) and list(mul.operands) == factors
            and tuple(add.operands) == (ly.result, mul.result) and st.value == add.result
            and st.memref == ly.memref and st.map == ly.map)


def match_conv2d(nest: affine.ForOp, *, any_filter_layout: bool = False, panels: bool = False,
                 grouped: bool = False) -> Conv2DNest | str:
    """The conv2d nest's description, or why it is not the textbook conv2d nest.
    `any_filter_layout`: a W that is not contiguous is no reason (loom-default asks, to
    copy such a W into a contiguous buffer only for a nest that is otherwise textbook);
    `panels`: an NHWC filter in panels (W[f floordiv NR, r, s, c, f mod NR]) is one too
    (loom-direct-conv reads them; im2col's matrix of W could not); `grouped`: a grouped
    conv2d's nest (X read at its group's channel, `group_channel`) is one too (only
    loom-grouped-conv schedules those: every other caller refuses them)."""
    band = perfect_band(nest)
    if len(band) != 7:
        return f"its perfect band has {len(band)} loops, not the 7 of conv2d's n, f, oh, ow, c, r, s"
    extents = []
    for loop in band:
        bounds = constant_bounds(loop)
        if bounds is None or bounds[0] != 0 or step_of(loop) != 1 or loop.inits:
            return "its loops are not all 0 to a constant, step 1 (already scheduled?)"
        extents.append(bounds[1])
    ivs = [loop.body.block.args[0] for loop in band]
    body = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
    guard = None
    if len(body) == 1 and isinstance(body[0], affine.IfOp):
        guard = body[0]
        if guard.else_region.blocks and any(not isinstance(o, affine.YieldOp) for o in guard.else_region.ops):
            return "its guard has an else branch"
        body = [o for o in guard.then_region.block.ops if not isinstance(o, affine.YieldOp)]
    if not _textbook_statement(body):
        return "its body is not the conv2d statement Y += X * W"
    lx, lw, ly, st = body[0], body[1], body[2], body[-1]
    for access in (lx, lw, ly, st):
        if list(access.indices) != ivs or access.map.data.num_symbols:
            return "its accesses are not indexed by the loop ivs alone"
    d = [AffineExpr.dimension(i) for i in range(7)]
    layout = next((name for name, form in _LAYOUTS.items()
                   if ly.map.data.results == tuple(d[i] for i in form.y)
                   and lw.map.data.results == tuple(d[i] for i in form.w)), None)
    wt = lw.memref.type
    panel, group = {5: (wt.get_shape()[-1], 0), 6: tuple(wt.get_shape()[-2:])}.get(wt.get_num_dims(), (0, 0))
    nhwc = _LAYOUTS["nhwc"]
    if layout is None and panel and ly.map.data.results == tuple(d[i] for i in nhwc.y):
        if lw.map.data.results == tuple(panel_subscripts(*(d[i] for i in nhwc.w), panel, group)):
            if not panels:
                shape = "P x R x S x C/G x NR x G" if group else "P x R x S x C x NR"
                return f"its filter is in panels ({shape}): only a direct convolution reads them"
            layout = "nhwc"
    if layout is None:
        return ("its accesses of W and Y are not W[f, c, r, s] and Y[n, f, oh, ow] (NCHW) "
                "or W[r, s, c, f] and Y[n, oh, ow, f] (NHWC)")
    form = _LAYOUTS[layout]
    xm = lx.map.data
    forms = map_forms(xm, ivs) if len(xm.results) == 4 else [None] * 4
    rows, cols = forms[form.rows], forms[form.cols]
    lead = tuple(xm.results[i] for i in range(4) if i not in (form.rows, form.cols))
    sizes = dict(zip(form.loops, extents))
    xt = lx.memref.type
    # with groups, X's channel is the group's: (f floordiv F/groups) * C/groups + c
    channels = xt.get_shape()[1 if layout == "nchw" else 3] if xt.get_num_dims() == 4 else 0
    groups = channels // sizes["c"] if grouped and not panel and sizes["c"] and channels % sizes["c"] == 0 else 1
    if groups > 1 and sizes["f"] % groups:
        groups = 1
    channel = (d[form.dim("c")] if groups == 1 else
               group_channel(d[form.dim("f")], d[form.dim("c")], sizes["f"] // groups, sizes["c"]))
    if lead != (d[form.x_rest[0]], channel) or rows is None or cols is None:
        return f"its read of X is not {form.x_text if groups == 1 else form.x_text.replace('c,', 'g*C/groups + c,')}"
    (hc, ph), (wc, pw) = ([rows.coeff(iv) for iv in ivs], -rows.const), ([cols.coeff(iv) for iv in ivs], -cols.const)
    if any(c for i, c in enumerate(hc) if i not in (form.oh, form.r)) or any(
            c for i, c in enumerate(wc) if i not in (form.ow, form.s)):
        return f"its read of X is not {form.x_text}"
    strides, dilations, padding = (hc[form.oh], wc[form.ow]), (hc[form.r], wc[form.s]), (ph, pw)
    if min(strides) < 1 or min(dilations) < 1 or min(padding) < 0:
        return f"its read of X has strides {list(strides)}, dilations {list(dilations)}, padding {list(padding)}"
    wt, yt = lw.memref.type, ly.memref.type
    n, f, ho, wo, c, r, s = (sizes[k] for k in ("n", "f", "oh", "ow", "c", "r", "s"))
    h, width = (xt.get_shape()[i] for i in (form.rows, form.cols))
    expected_guard = conv2d_guard(xm.results[form.rows], xm.results[form.cols], (h, width), padding)
    if (guard is None) != (expected_guard is None) or (guard is not None and guard.condition != expected_guard):
        return "its padding guard is not the one that keeps the read of X inside the input"
    shapes = {"x": [n, c * groups, h, width], "w": [f, c, r, s], "y": [n, f, ho, wo]} if layout == "nchw" else {
        "x": [n, h, width, c * groups], "y": [n, ho, wo, f],
        "w": [f // panel, r, s, c // group, panel, group] if group else [f // panel, r, s, c, panel] if panel
        else [r, s, c, f]}
    if [list(t.get_shape()) for t in (xt, wt, yt)] != [shapes["x"], shapes["w"], shapes["y"]]:
        return "its memrefs' shapes do not match its loops"
    for name, t in (("W", wt), ("Y", yt)):
        if not contiguous(t) and not (name == "W" and any_filter_layout):
            return f"{name} ({t}) is not contiguous: the matmul views it as a matrix"
    for value in (lx.memref, lw.memref, ly.memref):
        owner = value.owner
        if not isinstance(owner, Block) and nest.is_ancestor(owner):
            return "a memref it reads is defined inside it"
    return Conv2DNest(nest, lx.memref, lw.memref, ly.memref, n, f, ho, wo, c, r, s, h, width,
                      strides, padding, dilations, layout, panel, group, groups)


def staged_input(conv: Conv2DNest) -> tuple[list[Operation], SSAValue]:
    """X with its zero border written, the columns of each row split by their phase
    modulo the column stride sw: a buffer of N x C x (H + 2ph) x sw x ceil((W + 2pw) / sw)
    with `[n, c, ih, iw mod sw, iw floordiv sw]` the padded input's `[n, c, ih, iw]`,
    zeroed, then X copied into it (nests tagged "im2col.pad"). The patch copy then reads
    every window tap inside a buffer (no guard, no clamped bound) and, with a column
    stride, the taps of one phase at consecutive addresses: it vectorizes."""
    (ph, pw), sw = conv.padding, conv.strides[1]
    wide = -(-(conv.width + 2 * pw) // sw)
    d = [AffineExpr.dimension(i) for i in range(4)]
    column = (AffineExpr.constant(0), d[3] + pw) if sw == 1 else ((d[3] + pw) % sw, (d[3] + pw) // sw)
    return bordered(conv.x, [conv.n, conv.c, conv.h + 2 * ph, sw, wide], (d[0], d[1], d[2] + ph, *column),
                     "x_staged", ["n", "c", "h", "w"])


def bordered(x: SSAValue, shape: list[int], into: tuple[AffineExpr, ...], name: str, names: list[str],
             tag: str = "im2col.pad", extents: list[int] | None = None,
             start: tuple[int, ...] = (0, 0, 0, 0)) -> tuple[list[Operation], SSAValue]:
    """A buffer of `shape` named `name`, zeroed, then X copied into it, X[start + i] at
    `into`(i) (nests tagged `tag`, ivs named `names`), for i in `extents` (all of X by
    default: fewer where the rows and columns past them are read by no window; none, and
    no copy, where an extent is 0)."""
    element = x.type.get_element_type()
    buffer = memref.AllocOp.get(element, 64, shape)
    buffer.memref.name_hint = name
    to = AffineMapAttr(AffineMap(4, 0, into))
    at = AffineMapAttr(AffineMap(4, 0, tuple(AffineExpr.dimension(k) + o if o else AffineExpr.dimension(k)
                                             for k, o in enumerate(start))))

    def body(ivs: list[SSAValue]) -> list[Operation]:
        value = affine.LoadOp(x, ivs, at, element)
        return [value, affine.StoreOp(value.result, buffer.memref, ivs, to)]

    extents = extents or list(x.type.get_shape())
    copy = build_nest(extents, tag, body, names) if all(extents) else []
    return [buffer, *zero_nest(buffer.memref, tag), *copy], buffer.memref


def copy_nest(conv: Conv2DNest, source: SSAValue, col: SSAValue) -> list[Operation]:
    """col[n, c, r, s, oh, ow] = X[n, c, oh*sh + r*dh, ow*sw + s*dw]: read from X itself
    (no padding, unit column stride) or from `staged_input`'s buffer, where the tap is at
    `[n, c, oh*sh + r*dh, (s*dw) mod sw, ow + (s*dw) floordiv sw]` (the phase and shift
    computed per s, outside the loops over the output)."""
    (sh, sw), (dh, dw) = conv.strides, conv.dilations
    staged = source is not conv.x
    element = col.type.get_element_type()
    n, c, r, s, oh, ow, phase, shift = (AffineExpr.dimension(i) for i in range(8))
    rows = oh * sh + r * dh

    def body(outer: list[SSAValue]) -> list[Operation]:
        ops: list[Operation] = []
        if staged and sw == 1:  # one phase: the tap's column is ow + s*dw
            extra = []
            window = AffineMap(6, 0, (n, c, rows, AffineExpr.constant(0), ow + s * dw))
        elif staged:
            place = [affine.ApplyOp([outer[3]], AffineMapAttr(AffineMap(1, 0, (e,))))
                     for e in (AffineExpr.dimension(0) * dw % sw, AffineExpr.dimension(0) * dw // sw)]
            place[0].result.name_hint, place[1].result.name_hint = "phase", "shift"
            ops += place
            extra = [p.result for p in place]
            window = AffineMap(8, 0, (n, c, rows, phase, ow + shift))
        else:
            extra = []
            window = AffineMap(6, 0, (n, c, rows, ow * sw + s * dw))

        def inner(ivs: list[SSAValue]) -> list[Operation]:
            everything = [*outer, *ivs]
            value = affine.LoadOp(source, [*everything, *extra], AffineMapAttr(window), element)
            return [value, affine.StoreOp(value.result, col, everything, AffineMapAttr(AffineMap.identity(6)))]

        (loops,) = build_nest([conv.ho, conv.wo], "", inner, ["oh", "ow"])
        del loops.attributes[TAG]
        return [*ops, loops]

    return build_nest([conv.n, conv.c, conv.r, conv.s], "im2col", body, ["n", "c", "r", "s"])


def matmul_shape(conv: Conv2DNest) -> tuple[int, int, int]:
    """(M, N, K) of the matmul after the patch copy, per image in NCHW, of all images
    (their pixels as M) in NHWC."""
    k, p = conv.c * conv.r * conv.s, conv.ho * conv.wo
    return (conv.n * p, conv.f, k) if conv.layout == "nhwc" else (conv.f, p, k)


def _nchw_matmul(conv: Conv2DNest, ops: list[Operation], after: list[Operation]) -> tuple[list[Operation], str]:
    """NCHW: W (F x C*R*S) @ the patch matrix (C*R*S x Ho*Wo) = Y (F x Ho*Wo), per image
    (a batch loop, W repeated over it). Appends the copies to `ops`, the frees after the
    matmul to `after`; returns the views and the remark's words."""
    element = conv.x.type.get_element_type()  # the patch matrix holds X's elements (low precision too)
    _, p, k = matmul_shape(conv)
    batch = [conv.n] if conv.n > 1 else []
    if not conv.copies:
        b_source = conv.x
        how = "a 1x1 convolution with stride 1 and no padding: X is already the patch matrix, no copy"
    else:
        col = memref.AllocOp.get(element, 64, [conv.n, conv.c, conv.r, conv.s, conv.ho, conv.wo])
        col.memref.name_hint = "col"
        source = conv.x
        if conv.padding != (0, 0) or conv.strides[1] > 1:
            staging, source = staged_input(conv)
            ops += staging
        ops += [col, *copy_nest(conv, source, col.memref)]
        if source is not conv.x:
            ops.append(memref.DeallocOp.get(source))
        after.append(memref.DeallocOp.get(col.memref))
        b_source = col.memref
        kib = conv.n * k * p * element.bitwidth // 8 // 1024
        how = f"patch matrix {conv.n}x{k}x{p} ({kib} KiB) copied by nest 'im2col'"
    a = strided_view(conv.w, [*batch, conv.f, k], [0, k, 1] if batch else [k, 1])  # W repeated over the batch
    b = strided_view(b_source, [*batch, k, p], [k * p, p, 1] if batch else [p, 1])
    c = strided_view(conv.y, [*batch, conv.f, p], [conv.f * p, p, 1] if batch else [p, 1])
    shape = f"{conv.f}x{p}x{k}" + (f", batched over {conv.n}" if batch else "")
    return [a, b, c], f"{how}; then matmul {shape} (W as {conv.f}x{k}, Y as {conv.f}x{p})"


def _nhwc_matmul(conv: Conv2DNest, ops: list[Operation], after: list[Operation]) -> tuple[list[Operation], str]:
    """NHWC: the patch matrix (N*Ho*Wo x R*S*C) @ W (R*S*C x F) = Y (N*Ho*Wo x F), the
    batch folded into the rows: one matmul. X with its zero border when the conv pads (the
    copy runs along c, contiguous in X, whatever the strides)."""
    element = conv.x.type.get_element_type()
    p, _, k = matmul_shape(conv)
    if not conv.copies:
        a_source = conv.x
        how = "a 1x1 convolution with stride 1 and no padding: X is already the patch matrix, no copy"
    else:
        source = conv.x
        (sh, sw), (ph, pw), (dh, dw) = conv.strides, conv.padding, conv.dilations
        if ph or pw:
            d = [AffineExpr.dimension(i) for i in range(4)]
            staging, source = bordered(conv.x, [conv.n, conv.h + 2 * ph, conv.width + 2 * pw, conv.c],
                                        (d[0], d[1] + ph, d[2] + pw, d[3]), "x_padded", ["n", "h", "w", "c"])
            ops += staging
        col = memref.AllocOp.get(element, 64, [conv.n, conv.ho, conv.wo, conv.r, conv.s, conv.c])
        col.memref.name_hint = "col"
        ops.append(col)
        if dw == 1 and (source is not conv.x or contiguous(conv.x.type)):
            # the taps of a window row (s, c) are S*C consecutive elements of X's row: one
            # run each, copied on views of X as N x H x (W*C) and the patch matrix as
            # ... x R x (S*C) (a 3-channel stem's runs of 3 become runs of 21)
            run = conv.s * conv.c
            wide = source.type.get_shape()
            row = strided_view(source, [wide[0], wide[1], wide[2] * wide[3]], [wide[1] * wide[2] * wide[3], wide[2] * wide[3], 1])
            flat = strided_view(col.memref, [conv.n, conv.ho, conv.wo, conv.r, run],
                                [conv.ho * conv.wo * conv.r * run, conv.wo * conv.r * run, conv.r * run, run, 1])
            row.results[0].name_hint, flat.results[0].name_hint = "x_rows", "col_runs"
            n, oh, ow, r, t = (AffineExpr.dimension(i) for i in range(5))
            window = AffineMapAttr(AffineMap(5, 0, (n, oh * sh + r * dh, ow * (sw * conv.c) + t)))

            def tap(ivs: list[SSAValue]) -> list[Operation]:
                value = affine.LoadOp(row.results[0], ivs, window, element)
                return [value, affine.StoreOp(value.result, flat.results[0], ivs, AffineMapAttr(AffineMap.identity(5)))]

            ops += [row, flat, *build_nest([conv.n, conv.ho, conv.wo, conv.r, run], "im2col", tap,
                                           ["n", "oh", "ow", "r", "t"])]
        else:
            n, oh, ow, r, s, c = (AffineExpr.dimension(i) for i in range(6))
            window = AffineMapAttr(AffineMap(6, 0, (n, oh * sh + r * dh, ow * sw + s * dw, c)))

            def tap(ivs: list[SSAValue]) -> list[Operation]:
                value = affine.LoadOp(source, ivs, window, element)
                return [value, affine.StoreOp(value.result, col.memref, ivs, AffineMapAttr(AffineMap.identity(6)))]

            ops += build_nest([conv.n, conv.ho, conv.wo, conv.r, conv.s, conv.c], "im2col", tap,
                              ["n", "oh", "ow", "r", "s", "c"])
        if source is not conv.x:
            ops.append(memref.DeallocOp.get(source))
        after.append(memref.DeallocOp.get(col.memref))
        a_source = col.memref
        how = f"patch matrix {p}x{k} ({p * k * element.bitwidth // 8 // 1024} KiB) copied by nest 'im2col'"
    a = strided_view(a_source, [p, k], [k, 1])
    b = strided_view(conv.w, [k, conv.f], [conv.f, 1])
    c = strided_view(conv.y, [p, conv.f], [conv.f, 1])
    return [a, b, c], f"{how}; then matmul {p}x{conv.f}x{k} (W as {k}x{conv.f}, Y as {p}x{conv.f})"


def rewrite(conv: Conv2DNest) -> str:
    """Replace the nest; returns the remark."""
    ops: list[Operation] = []
    after: list[Operation] = []
    views, how = (_nhwc_matmul if conv.layout == "nhwc" else _nchw_matmul)(conv, ops, after)
    for view in views:
        source = view.operands[0]
        view.results[0].name_hint = f"{source.name_hint or 'v'}_mat"  # loom-pack names its buffers after them
    ops += [*views, *matmul_nest(*(v.results[0] for v in views))]
    replace_nest(conv.nest, ops, after)
    return f"nest 'conv2d' {conv.describe()}: {how}"


def replace_nest(nest: affine.ForOp, ops: list[Operation], after: list[Operation]) -> None:
    """Put `ops` where the nest is and `after` right after it (at its location), and
    erase the nest."""
    block = nest.parent_block()
    assert block is not None
    for op in [*ops, *after]:
        for inner in op.walk():
            inner.location = nest.location
    block.insert_ops_before(ops, nest)
    block.insert_ops_after(after, nest)
    block.erase_op(nest)


def rewrite_conv2d_nests(op: ModuleOp, tag: str | None, pass_name: str, rewrite: Callable[[Conv2DNest], str],
                         panels: bool = False, match: Callable[[affine.ForOp], Conv2DNest | str] | None = None,
                         what: str = "conv2d") -> None:
    """A conv2d pass's apply: `rewrite` every textbook conv2d nest of the nests `tag`
    selects (a remark each). With `tag`, a nest that is not one is refused; without, it
    is skipped with a remark, unless no nest is one (refused, the 7-loop nests' reasons
    given). `panels`: `rewrite` takes filters in panels (`match_conv2d`); `match`: the
    pass's own test of a nest instead (loom-grouped-conv's), `what` the nests it takes."""
    nests = select_nests(op, tag, pass_name)
    found = [(nest, match(nest) if match is not None else match_conv2d(nest, panels=panels)) for nest in nests]
    if tag is not None:
        for nest, conv in found:
            if isinstance(conv, str):
                raise LoomError(f"{pass_name}: cannot rewrite nest '{nest_tag(nest) or 'untagged'}': {conv}", nest)
    elif not any(isinstance(conv, Conv2DNest) for _, conv in found):
        seven = [(n, c) for n, c in found if len(perfect_band(n)) == 7]
        why = ("; ".join(f"nest '{nest_tag(n) or 'untagged'}': {c}" for n, c in seven) if seven
               else "no nest has the 7 loops of conv2d's n, f, oh, ow, c, r, s")
        raise LoomError(f"{pass_name}: no {what} nest to rewrite: {why}", (seven or found)[0][0] if found else None)
    for nest, conv in found:
        if isinstance(conv, str):
            remark(pass_name, nest, f"nest '{nest_tag(nest) or 'untagged'}' skipped: {conv}", missed=True)
        else:
            remark(pass_name, nest, rewrite(conv))


@dataclass(frozen=True)
class LoomIm2colPass(ModulePass):
    name = "loom-im2col"

    op: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_conv2d_nests(op, self.op, self.name, rewrite)
