"""convert-loom-to-affine: each bufferized loom op -> one perfect affine.for nest.

The nests are the textbook ones, the starting point of every schedule:

- `loom.matmul`: a nest (b,) i, j that zeroes C, then the perfect nest (b,) i, j, k with
  `C[i, j] += A[i, k] * B[k, j]`;
- `loom.conv2d`: a zeroing nest, then n, f, oh, ow, c, r, s with
  `Y[n, f, oh, ow] += X[n, c, oh*sh + r*dh - ph, ow*sw + s*dw - pw] * W[f, c, r, s]`
  (NHWC: n, oh, ow, f, r, s, c with `Y[n, oh, ow, f] += X[n, ih, iw, c] * W[r, s, c, f]`);
  with `groups`, c runs over one group's C/groups channels and X is read at channel
  `(f floordiv (F/groups)) * (C/groups) + c` (`group_channel`; `f + c` depthwise);
  with padding, the read sits under an `affine.if` that keeps it inside the input (the
  padded border contributes zero; nothing is read out of bounds);
  Low precision: bf16 elements are widened to f32 (`arith.extf`), i8/ui8 to i32
  (`arith_ext.extsi`/`extui`: arith's casts that take vectors too) as they are read, and
  summed with `muli`/`addi` in i32;
- `loom.add` / `loom.mul` / `loom.relu` / `loom.clamp`: one nest over the output, operands indexed with
  numpy broadcasting (a size-1 or missing dimension reads index 0); on i32, `addi`,
  `muli` and `maxsi`;
- `loom.cast` (`truncf`, `extf`, `arith_ext.sitofp`), `loom.quantize` (`divf`,
  `math.roundeven`, the zero point added, `maxnumf`/`minnumf` to the range,
  `arith_ext.fptosi` and `trunci`) and
  `loom.dequantize` (widened, `subi`, `sitofp`, `mulf`): the same one nest, the scale
  and the zero point read at the channel's index (per channel) or once (per tensor);
- `loom.max_pool2d`: Y filled with -inf (i32's least: `max_pool2d.init`), then n, oh, ow,
  r, s, c (NHWC; NCHW: n, c, oh, ow, r, s) with `Y[...] = maximumf(Y[...], X[n, oh*sh + r
  - ph, ow*sw + s - pw, c])` (a NaN wins; `maxsi` on i32), one nest per run of rows and
  columns whose windows overhang the padding alike, over the taps inside the input: no
  guard, so the channels vectorize; `loom.avg_pool2d` the same with a zero fill and `addf`,
  then each run times 1 / its count (`avg_pool2d.scale`: the window's area, or with
  count_include_pad false the run's taps);
- `loom.mean`: a zero fill, a nest over X adding each element into Y at its kept indices
  (`mean`), then Y multiplied by 1 / count (`mean.scale`);
- `memref.copy` (from bufferization: `loom.contiguous`, a reshape that is not a view, a
  returned argument): a copy nest, each side read or written through its own layout.

Views need nothing here: loom-bufferize made them memref views (`memref.reinterpret_cast`
to a strided layout), and the accesses of the nests go through the memref types, whose
strides and offset the lowering to LLVM applies (`loom-convert-to-llvm`'s
`memref_layout`): an op reading a transposed or broadcast view reads it in place.

The outermost loop of each nest carries `loom.tag = "<op>"` (`"matmul"`, `"conv2d"`,
`"add"`, ...; the zeroing nests `"<op>.init"`), which the schedule passes select on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from xdsl.context import Context
from xdsl.dialects import affine, arith, math, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    Signedness,
    StringAttr,
    bf16,
    f32,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind, AffineSet
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from passes.support.diagnostics import LoomError
from dialects import arith_ext, loom, winograd

TAG = "loom.tag"

BodyFn = Callable[[list[SSAValue]], list[Operation]]


def build_nest(
    extents: Sequence[int], tag: str, body: BodyFn, names: Sequence[str] | None = None
) -> list[Operation]:
    """A perfect nest `for d0 in 0..e0: for d1 in 0..e1: ... body(ivs)`, outermost
    loop tagged, induction variables named after `names`. A rank-0 nest is the body."""
    if not extents:
        return body([])
    blocks = [Block(arg_types=[IndexType()]) for _ in extents]
    ivs = [b.args[0] for b in blocks]
    for iv, name in zip(ivs, names or ()):
        iv.name_hint = name
    blocks[-1].add_ops([*body(ivs), affine.YieldOp.get()])
    loop: affine.ForOp | None = None
    for depth in reversed(range(len(extents))):
        block = blocks[depth]
        if loop is not None:
            block.add_ops([loop, affine.YieldOp.get()])
        loop = affine.ForOp.from_region([], [], [], [], 0, extents[depth], Region(block))
    assert loop is not None
    loop.attributes[TAG] = StringAttr(tag)
    return [loop]


def access(ivs: Sequence[SSAValue], exprs: Sequence[AffineExpr]) -> AffineMapAttr:
    """The map of an access at `exprs`, the loop ivs being its dims."""
    return AffineMapAttr(AffineMap(len(ivs), 0, tuple(exprs)))


def load(mem: SSAValue, ivs: Sequence[SSAValue], exprs: Sequence[AffineExpr]) -> affine.LoadOp:
    return affine.LoadOp(mem, ivs, access(ivs, exprs), mem.type.get_element_type())


def store(val: SSAValue, mem: SSAValue, ivs: Sequence[SSAValue], exprs: Sequence[AffineExpr]) -> affine.StoreOp:
    return affine.StoreOp(val, mem, ivs, access(ivs, exprs))


def dims(n: int) -> list[AffineExpr]:
    return [AffineExpr.dimension(i) for i in range(n)]


def broadcast_exprs(operand_shape: Sequence[int], out_shape: Sequence[int]) -> list[AffineExpr]:
    """Index expressions reading `operand_shape` broadcast to `out_shape` (numpy rules)."""
    lead = len(out_shape) - len(operand_shape)
    return [
        AffineExpr.constant(0) if d == 1 and out_shape[lead + i] != 1 else AffineExpr.dimension(lead + i)
        for i, d in enumerate(operand_shape)
    ]


def constant(value: float, t: Attribute) -> arith.ConstantOp:
    """A scalar constant of element type `t` (an integer one for i32, i8, ...)."""
    return arith.ConstantOp(IntegerAttr(int(value), t) if isinstance(t, IntegerType) else FloatAttr(value, t))


def widen(value: SSAValue, to: Attribute) -> tuple[list[Operation], SSAValue]:
    """`value` in the accumulator type `to`: bf16 extended to f32 (exact), i8 sign- and ui8
    zero-extended to i32; the ops that do it and the widened value."""
    t = value.type
    if t == to:
        return [], value
    if t == bf16:
        op: Operation = arith.ExtFOp(value, to)
    elif isinstance(t, IntegerType) and t.signedness.data == Signedness.UNSIGNED:
        op = arith_ext.ExtUIOp(value, to)
    else:
        op = arith_ext.ExtSIOp(value, to)
    return [op], op.results[0]


def accumulate(acc: SSAValue, a: SSAValue, b: SSAValue) -> list[Operation]:
    """`acc + a * b` in acc's type, a and b widened to it first; the sum is the last op."""
    to_a, a = widen(a, acc.type)
    to_b, b = widen(b, acc.type)
    mul, add = (arith.MuliOp, arith.AddiOp) if isinstance(acc.type, IntegerType) else (arith.MulfOp, arith.AddfOp)
    prod = mul(a, b)
    return [*to_a, *to_b, prod, add(acc, prod)]


def zero_of(element: Attribute) -> list[Operation]:
    """The ops of a zero of a scalar type, the last one's result: a ui8 zero (arith's
    constants are signless) is an i32 zero truncated to ui8."""
    if isinstance(element, IntegerType) and element.signedness.data == Signedness.UNSIGNED:
        wide = constant(0, i32)
        return [wide, arith_ext.TruncIOp(wide.result, element)]
    return [constant(0, element)]


def zero_nest(out: SSAValue, tag: str) -> list[Operation]:
    """`out` filled with zeros (`zero_of`), a nest tagged `tag`."""
    return _filled(out, zero_of(out.type.get_element_type()), tag)


def fill_nest(out: SSAValue, value: float, tag: str) -> list[Operation]:
    """`out` filled with `value`, a nest tagged `tag`."""
    return _filled(out, [constant(value, out.type.get_element_type())], tag)


def _filled(out: SSAValue, made: list[Operation], tag: str) -> list[Operation]:
    """The ops `made` (the last one's result is the value), then a nest storing it into
    every element of `out`."""
    t = out.type
    assert isinstance(t, MemRefType)
    value = made[-1].results[0]
    shape = t.get_shape()
    return [*made, *build_nest(shape, tag, lambda ivs: [store(value, out, ivs, dims(len(shape)))])]


def scale_nest(y: SSAValue, extents: Sequence[int], at: Sequence[AffineExpr], factor: float,
               tag: str) -> list[Operation]:
    """`y[at] *= factor` over a nest of `extents` (its ivs the dims of `at`), tagged `tag`."""
    c = constant(factor, y.type.get_element_type())

    def body(ivs):
        ly = load(y, ivs, at)
        product = arith.MulfOp(ly.result, c.result)
        return [ly, product, store(product.result, y, ivs, at)]

    return [c, *build_nest(extents, tag, body)]


def lower_matmul(op: loom.MatmulOp) -> list[Operation]:
    a, b = op.ins
    return [*zero_nest(op.outs[0], "matmul.init"), *matmul_nest(a, b, op.outs[0])]


def matmul_nest(a: SSAValue, b: SSAValue, c: SSAValue, a_at: Sequence[AffineExpr] | None = None,
                b_at: Sequence[AffineExpr] | None = None, k: int | None = None) -> list[Operation]:
    """The textbook nest (b,) i, j, k of `C[(b,) i, j] += A[(b,) i, k] * B[(b,) k, j]`
    on memrefs (C already zeroed), tagged "matmul". `a_at`, `b_at`: A's or B's
    subscripts, expressions of the nest's ivs, when it is not the matrix itself
    (loom-direct-conv reads the windows of an input through them, and a filter's panel
    in groups); `k` the extent of k where neither is (else the matrix operand's)."""
    batched = len(c.type.get_shape()) == 3
    k_extent = k if k is not None else b.type.get_shape()[-2] if a_at is not None else a.type.get_shape()[-1]
    extents = [*c.type.get_shape(), k_extent]
    nb = 1 if batched else 0
    bt = [AffineExpr.dimension(0)] if batched else []
    i, j, kd = (AffineExpr.dimension(nb + x) for x in range(3))

    def body(ivs):
        la = load(a, ivs, a_at if a_at is not None else [*bt, i, kd])
        lb = load(b, ivs, b_at if b_at is not None else [*bt, kd, j])
        lc = load(c, ivs, [*bt, i, j])
        ops = accumulate(lc.result, la.result, lb.result)
        return [la, lb, lc, *ops, store(ops[-1].results[0], c, ivs, [*bt, i, j])]

    names = ["b", "i", "j", "k"][1 - nb :]
    return build_nest(extents, "matmul", body, names)


def panel_subscripts(r: AffineExpr, s: AffineExpr, c: AffineExpr, f: AffineExpr, nr: int, g: int) -> list[AffineExpr]:
    """Where W[r, s, c, f] lies in a filter in panels of NR (`loom.conv2d`'s rank 5:
    [f floordiv NR, r, s, c, f mod NR]), or in panels of groups of G (rank 6: [f floordiv
    NR, r, s, c floordiv G, f mod NR, c mod G])."""
    if g:
        return [f // nr, r, s, c // g, f % nr, c % g]
    return [f // nr, r, s, c, f % nr]


def group_channel(f: AffineExpr, c: AffineExpr, out_per_group: int, in_per_group: int) -> AffineExpr:
    """The input channel a grouped conv2d's output channel f reads at the group's channel
    c: (f floordiv F/groups) * C/groups + c, in the fewest terms (`f + c` depthwise)."""
    group = f if out_per_group == 1 else f // out_per_group
    return (group if in_per_group == 1 else group * in_per_group) + c


def lower_conv2d(op: loom.Conv2DOp) -> list[Operation]:
    x, w = op.ins
    y = op.outs[0]
    (sh, sw), (ph, pw), (dh, dw) = op.conv_params()
    nhwc = op.layout_name() == "nhwc"
    nr = op.filter_panel()
    if nhwc:
        n_, h_, w_, _ = x.type.get_shape()
        r_, s_, c_ = w.type.get_shape()[1:4] if nr else w.type.get_shape()[:3]
        if op.filter_group():
            c_ *= op.filter_group()
        _, ho, wo, f_ = y.type.get_shape()
        n, oh, ow, f, r, s, c = dims(7)
    else:
        n_, _, h_, w_ = x.type.get_shape()
        f_, c_, r_, s_ = w.type.get_shape()
        _, _, ho, wo = y.type.get_shape()
        n, f, oh, ow, c, r, s = dims(7)
    ih = oh * sh + r * dh - ph
    iw = ow * sw + s * dw - pw
    groups = op.group_count()
    # the input channel: c itself, or with groups c of f's group
    xc = c if groups == 1 else group_channel(f, c, f_ // groups, w.type.get_shape()[2 if nhwc else 1])
    x_at, w_at, y_at = ([n, ih, iw, xc], [r, s, c, f], [n, oh, ow, f]) if nhwc else (
        [n, xc, ih, iw], [f, c, r, s], [n, f, oh, ow])
    if nr:  # the filter in panels: W[r, s, c, f] at [f floordiv NR, r, s, c, f mod NR]
        w_at = panel_subscripts(r, s, c, f, nr, op.filter_group())

    def body(ivs):
        lx = load(x, ivs, x_at)
        lw = load(w, ivs, w_at)
        ly = load(y, ivs, y_at)
        sums = accumulate(ly.result, lx.result, lw.result)
        ops: list[Operation] = [lx, lw, ly, *sums, store(sums[-1].results[0], y, ivs, y_at)]
        inside = conv2d_guard(ih, iw, (h_, w_), (ph, pw))
        if inside is None:
            return ops
        guarded = affine.IfOp.create(
            operands=list(ivs),
            properties={"condition": inside},
            regions=[Region(Block([*ops, affine.YieldOp.get()])), Region()],
        )
        return [guarded]

    if nhwc:  # the output's dimensions, then the reduction in the order the input is laid out
        return [*zero_nest(y, "conv2d.init"), *build_nest(
            [n_, ho, wo, f_, r_, s_, c_], "conv2d", body, ["n", "oh", "ow", "f", "r", "s", "c"])]
    return [*zero_nest(y, "conv2d.init"), *build_nest(
        [n_, f_, ho, wo, c_, r_, s_], "conv2d", body, ["n", "f", "oh", "ow", "c", "r", "s"]
    )]


def lowest(element: Attribute) -> float:
    """The least value of a max's element type: -inf, or i32's least."""
    return -(2**31) if isinstance(element, IntegerType) else float("-inf")


def window_runs(outputs: int, extent: int, window: int, stride: int, pad: int) -> list[tuple[int, int, int, int]]:
    """The outputs of one spatial dimension in runs whose windows read the same taps
    inside the input: (first output, count, first tap, end tap). The windows that overhang
    the padded border get runs of their own, with fewer taps; the others share one."""
    runs: list[list[int]] = []
    for o in range(outputs):
        lo, hi = max(0, pad - o * stride), min(window, extent + pad - o * stride)
        if runs and runs[-1][2:] == [lo, hi]:
            runs[-1][1] += 1
        else:
            runs.append([o, 1, lo, hi])
    return [(o, n, lo, hi) for o, n, lo, hi in runs]


def lower_pool2d(op: loom.Pool2DOp) -> list[Operation]:
    """Y filled with -inf (max) or 0 (avg), then a nest per run of output rows and columns
    whose windows read the same taps (`window_runs`): the padded border is never read, and
    no guard keeps the channels from vectorizing. avg_pool2d then scales each run by 1 /
    its count (the window's area, or its taps inside the input)."""
    x, y = op.ins[0], op.outs[0]
    (r_, s_), (sh, sw), (ph, pw) = op.pool_params()
    nhwc = op.layout_name() == "nhwc"
    element = y.type.get_element_type()
    if nhwc:
        n_, h_, w_, c_ = x.type.get_shape()
        _, ho, wo, _ = y.type.get_shape()
    else:
        n_, c_, h_, w_ = x.type.get_shape()
        _, _, ho, wo = y.type.get_shape()
    average = isinstance(op, loom.AvgPool2DOp)
    tag = op.name.removeprefix("loom.")
    if average:
        combine: type[Operation] = arith.AddfOp
    else:  # (a NaN wins, as in torch)
        combine = arith.MaxSIOp if isinstance(element, IntegerType) else arith.MaximumfOp
    ops = fill_nest(y, 0.0 if average else lowest(element), f"{tag}.init")
    scales: list[tuple[list[int], list[AffineExpr], int]] = []  # (extents, output index, count) per run
    for oh0, rows, r0, r1 in window_runs(ho, h_, r_, sh, ph):
        for ow0, cols, s0, s1 in window_runs(wo, w_, s_, sw, pw):
            if nhwc:
                n, oh, ow, r, s, c = dims(6)
                extents, names = [n_, rows, cols, r1 - r0, s1 - s0, c_], ["n", "oh", "ow", "r", "s", "c"]
            else:
                n, c, oh, ow, r, s = dims(6)
                extents, names = [n_, c_, rows, cols, r1 - r0, s1 - s0], ["n", "c", "oh", "ow", "r", "s"]
            ih, iw = (oh + oh0) * sh + r + (r0 - ph), (ow + ow0) * sw + s + (s0 - pw)
            x_at, y_at = ([n, ih, iw, c], [n, oh + oh0, ow + ow0, c]) if nhwc else (
                [n, c, ih, iw], [n, c, oh + oh0, ow + ow0])

            def body(ivs, x_at=x_at, y_at=y_at):
                lx, ly = load(x, ivs, x_at), load(y, ivs, y_at)
                most = combine(ly.result, lx.result)
                return [lx, ly, most, store(most.result, y, ivs, y_at)]

            ops += build_nest(extents, tag, body, names)
            if average and not op.counts_padding():
                d = dims(4)
                out_at = [d[0], d[1] + oh0, d[2] + ow0, d[3]] if nhwc else [d[0], d[1], d[2] + oh0, d[3] + ow0]
                region = [n_, rows, cols, c_] if nhwc else [n_, c_, rows, cols]
                scales.append((region, out_at, (r1 - r0) * (s1 - s0)))
    if average:
        if op.counts_padding():
            scales = [(list(y.type.get_shape()), dims(4), r_ * s_)]
        for region, out_at, count in scales:
            ops += scale_nest(y, region, out_at, 1.0 / count, f"{tag}.scale")
    return ops


def lower_mean(op: loom.MeanOp) -> list[Operation]:
    """Y = 0; Y[kept] += X over X's own loop order (its last dimension innermost: a sum of
    rows of vectors where the last dimension is kept); then Y *= 1 / count."""
    x, y = op.ins[0], op.outs[0]
    shape = x.type.get_shape()
    axes = op.reduced(len(shape))
    y_at = [AffineExpr.constant(0) if d in axes else AffineExpr.dimension(d) for d in range(len(shape))]

    def body(ivs):
        lx, ly = load(x, ivs, dims(len(shape))), load(y, ivs, y_at)
        total = arith.AddfOp(ly.result, lx.result)
        return [lx, ly, total, store(total.result, y, ivs, y_at)]

    count = 1
    for d in axes:
        count *= shape[d]
    out_shape = y.type.get_shape()
    return [*zero_nest(y, "mean.init"), *build_nest(shape, "mean", body),
            *scale_nest(y, out_shape, dims(len(out_shape)), 1.0 / count, "mean.scale")]


def linear(terms: Sequence[tuple[Fraction, SSAValue | None]], element: Attribute) -> tuple[list[Operation], SSAValue]:
    """sum(c * v) over `terms` (a None value is a zero: the padded border), in `element`:
    terms of coefficient 0 dropped, +-1 added or subtracted with no multiplication, a
    factor all the others share taken out (G's row 1/2, 1/2, 1/2 is one product of the
    sum); the ops and the value (a constant 0 where no term is left)."""
    kept = [(coef, v) for coef, v in terms if coef != 0 and v is not None]
    common = {abs(coef) for coef, _ in kept}
    if len(common) == 1 and (factor := common.pop()) != 1:
        ops, total = linear([(coef / factor, v) for coef, v in kept], element)
        c = constant(float(factor), element)
        product = arith.MulfOp(total, c.result)
        return [*ops, c, product], product.result
    ops: list[Operation] = []
    total: SSAValue | None = None
    negate = False  # `total` holds minus the sum so far (a sum that began with a -1 term)
    for coef, v in kept:
        if abs(coef) != 1:
            c = constant(float(abs(coef)), element)
            product = arith.MulfOp(v, c.result)
            ops += [c, product]
            v = product.result
        minus = coef < 0
        if total is None:
            total, negate = v, minus
            continue
        step = arith.SubfOp(total, v) if minus != negate else arith.AddfOp(total, v)
        ops.append(step)
        total = step.result
    if total is None:
        zero = constant(0.0, element)
        return [zero], zero.result
    if negate:
        neg = arith.NegfOp(total)
        ops.append(neg)
        total = neg.result
    return ops, total


def sandwich(left: winograd.Matrix, tile: Sequence[Sequence[SSAValue | None]], right: winograd.Matrix,
             element: Attribute, rows: Sequence[int], cols: Sequence[int]) -> tuple[list[Operation], dict]:
    """left @ tile @ right^T, elements (a, b) for a in `rows`, b in `cols`, as linear
    combinations (`linear`): the ops and {(a, b): value}."""
    ops: list[Operation] = []
    half: dict[tuple[int, int], SSAValue] = {}
    for a in rows:
        for s in range(len(tile[0])):
            made, half[a, s] = linear([(left[a][r], tile[r][s]) for r in range(len(tile))], element)
            ops += made
    out = {}
    for a in rows:
        for b in cols:
            made, out[a, b] = linear([(right[b][s], half[a, s]) for s in range(len(tile[0]))], element)
            ops += made
    return ops, out


def _winograd_parts(op: loom.WinogradOp, which: int):
    """A Winograd op's input and output memrefs, m, alpha, its matrix (`which` of
    MATRICES[m]: 0 B^T, 1 G, 2 A^T) and its element type."""
    m = op.tile_size()
    return op.ins[0], op.outs[0], m, winograd.points(m), winograd.MATRICES[m][which], op.outs[0].type.get_element_type()


def lower_winograd_filter(op: loom.WinogradFilterOp) -> list[Operation]:
    """U[a*alpha + b, c, f] = (G g G^T)[a, b]: a nest over (c, f), f innermost (the
    filter's unit stride: vectorized), the 9 taps loaded and the alpha^2 sums stored."""
    w, u, m, alpha, g_mat, element = _winograd_parts(op, 1)
    _, _, c_, f_ = w.type.get_shape()
    c, f = dims(2)

    def body(ivs):
        loads = [[load(w, ivs, [AffineExpr.constant(r), AffineExpr.constant(s), c, f]) for s in range(3)]
                 for r in range(3)]
        ops, out = sandwich(g_mat, [[ld.result for ld in row] for row in loads], g_mat, element,
                            range(alpha), range(alpha))
        stores = [store(out[a, b], u, ivs, [AffineExpr.constant(a * alpha + b), c, f])
                  for a in range(alpha) for b in range(alpha)]
        return [*(ld for row in loads for ld in row), *ops, *stores]

    return build_nest([c_, f_], "winograd_filter", body, ["c", "f"])


def lower_winograd_input(op: loom.WinogradInputOp) -> list[Operation]:
    """V[a*alpha + b, p, c] = (B^T d B)[a, b]: a nest over (n, i, j, c) per run of tile
    rows and columns whose tiles overhang the padded border alike (`window_runs` of the
    alpha-wide tiles, m apart), each reading only its taps inside the input (the others
    are zeros, dropped from the sums): no guard, c innermost (vectorized)."""
    x, v, m, alpha, bt, element = _winograd_parts(op, 0)
    n_, h_, w_, c_ = x.type.get_shape()
    ph, pw = op.pad()
    ho, wo = op.output_hw(x.type.get_shape())
    th, tw = winograd.tiles(ho, m), winograd.tiles(wo, m)
    ops: list[Operation] = []
    for i0, rows, r0, r1 in window_runs(th, h_, alpha, m, ph):
        for j0, cols, s0, s1 in window_runs(tw, w_, alpha, m, pw):
            n, i, j, c = dims(4)

            def body(ivs, i0=i0, j0=j0, taps=(range(r0, r1), range(s0, s1))):
                loads = {(r, s): load(x, ivs, [n, (i + i0) * m + (r - ph), (j + j0) * m + (s - pw), c])
                         for r in taps[0] for s in taps[1]}
                tile = [[loads[r, s].result if (r, s) in loads else None for s in range(alpha)]
                        for r in range(alpha)]
                made, out = sandwich(bt, tile, bt, element, range(alpha), range(alpha))
                p = (n * th + i + i0) * tw + j + j0
                return [*loads.values(), *made, *(store(out[a, b], v, ivs, [AffineExpr.constant(a * alpha + b), p, c])
                                                  for a in range(alpha) for b in range(alpha))]

            ops += build_nest([n_, rows, cols, c_], "winograd_input", body, ["n", "i", "j", "c"])
    return ops


def lower_winograd_output(op: loom.WinogradOutputOp) -> list[Operation]:
    """Y[n, i*m + r, j*m + s, f] = (A^T M A)[r, s]: a nest over (n, i, j, f) per run of
    tile rows and columns with the same number of outputs inside Y (the last tile of a
    row or column may overhang it: its overhang is neither computed nor stored), f
    innermost (vectorized); each output element is stored once."""
    prods, y, m, alpha, at, element = _winograd_parts(op, 2)
    n_, ho, wo, f_ = y.type.get_shape()
    th, tw = winograd.tiles(ho, m), winograd.tiles(wo, m)
    ops: list[Operation] = []
    for i0, rows, _, r1 in window_runs(th, ho, m, m, 0):
        for j0, cols, _, s1 in window_runs(tw, wo, m, m, 0):
            n, i, j, f = dims(4)

            def body(ivs, i0=i0, j0=j0, kept=(range(r1), range(s1))):
                p = (n * th + i + i0) * tw + j + j0
                loads = [[load(prods, ivs, [AffineExpr.constant(a * alpha + b), p, f]) for b in range(alpha)]
                         for a in range(alpha)]
                made, out = sandwich(at, [[ld.result for ld in row] for row in loads], at, element, *kept)
                return [*(ld for row in loads for ld in row), *made,
                        *(store(out[r, s], y, ivs, [n, (i + i0) * m + r, (j + j0) * m + s, f])
                          for r in kept[0] for s in kept[1])]

            ops += build_nest([n_, rows, cols, f_], "winograd_output", body, ["n", "i", "j", "f"])
    return ops


def conv2d_guard(ih: AffineExpr, iw: AffineExpr, hw: tuple[int, int], padding: tuple[int, int]) -> AffineSetAttr | None:
    """The condition that keeps the conv2d nest's input read at (ih, iw), expressions of
    its 7 ivs, inside the H x W input: a bound per padded side; None without padding."""
    ge = AffineConstraintKind.ge
    constraints = []
    for e, extent, pad in ((ih, hw[0], padding[0]), (iw, hw[1], padding[1])):
        if pad:
            constraints += [AffineConstraintExpr(ge, e, AffineExpr.constant(0)),
                            AffineConstraintExpr(ge, AffineExpr.constant(extent - 1), e)]
    return AffineSetAttr(AffineSet(7, 0, tuple(constraints))) if constraints else None


def elementwise_body(op: loom.LoomComputeOp, values: list[SSAValue]) -> list[Operation]:
    """The ops computing one output element of an elementwise op (add, mul, relu, clamp, cast,
    quantize, dequantize) from its operands' elements `values`; the result is the last op's."""
    out_t = op.output_type.get_element_type()
    integer = isinstance(out_t, IntegerType)
    if isinstance(op, loom.ReluOp):
        zero = constant(0, out_t)
        if integer:
            return [zero, arith.MaxSIOp(values[0], zero)]
        # max(x, 0) with NaN passing through, like numpy.maximum(x, 0)
        keep = arith.CmpfOp(values[0], zero, "ugt")
        return [zero, keep, arith.SelectOp(keep, values[0], zero)]
    if isinstance(op, loom.ClampOp):
        # max(x, min), then min(., max), a NaN passing through both (as numpy.clip)
        lo, hi = (constant(b, out_t) for b in op.bounds())
        above = arith.CmpfOp(values[0], lo, "ugt")
        raised = arith.SelectOp(above, values[0], lo)
        below = arith.CmpfOp(raised, hi, "ult")
        return [lo, hi, above, raised, below, arith.SelectOp(below, raised, hi)]
    if isinstance(op, loom.AddOp | loom.MulOp):
        ops = {(loom.AddOp, False): arith.AddfOp, (loom.MulOp, False): arith.MulfOp,
               (loom.AddOp, True): arith.AddiOp, (loom.MulOp, True): arith.MuliOp}
        return [ops[type(op), integer](values[0], values[1])]
    if isinstance(op, loom.CastOp):
        x = values[0]
        if x.type == bf16:
            return [arith.ExtFOp(x, out_t)]
        if out_t == bf16:
            return [arith.TruncFOp(x, out_t)]
        return [arith_ext.SIToFPOp(x, out_t)]
    if isinstance(op, loom.QuantizeOp):
        x, scale, zero_point = values
        least, greatest = loom.QUANTIZED[out_t]
        quotient = arith.DivfOp(x, scale)
        rounded = math.RoundEvenOp(quotient)
        zp = arith_ext.SIToFPOp(zero_point, f32)
        shifted = arith.AddfOp(rounded, zp)
        lo, hi = constant(least, f32), constant(greatest, f32)
        above = arith.MaxnumfOp(shifted, lo)  # maxnum: a NaN gives the least value
        clamped = arith.MinnumfOp(above, hi)
        whole = arith_ext.FPToSIOp(clamped, i32)
        return [quotient, rounded, zp, shifted, lo, hi, above, clamped, whole, arith_ext.TruncIOp(whole, out_t)]
    assert isinstance(op, loom.DequantizeOp), op.name
    q, scale, zero_point = values
    to_i32, q = widen(q, i32)
    diff = arith.SubiOp(q, zero_point)
    as_float = arith_ext.SIToFPOp(diff, f32)
    return [*to_i32, diff, as_float, arith.MulfOp(as_float, scale)]


def operand_exprs(op: loom.LoomComputeOp, index: int, out_shape: Sequence[int]) -> list[AffineExpr]:
    """Where an elementwise op reads operand `index` for the output element at the nest's
    ivs: numpy broadcasting, or a quantization parameter's channel (or nothing, per tensor)."""
    if isinstance(op, loom.AffineQuantizationOp) and index > 0:
        axis = op.quantization_axis(len(out_shape))
        return [] if axis is None else [AffineExpr.dimension(axis)]
    return broadcast_exprs(op.ins[index].type.get_shape(), out_shape)


def lower_elementwise(op: loom.LoomComputeOp) -> list[Operation]:
    out = op.outs[0]
    shape = out.type.get_shape()
    tag = op.name.removeprefix("loom.")

    def body(ivs):
        loads = [load(v, ivs, operand_exprs(op, i, shape)) for i, v in enumerate(op.ins)]
        compute = elementwise_body(op, [ld.result for ld in loads])
        return [*loads, *compute, store(compute[-1].results[0], out, ivs, dims(len(shape)))]

    return build_nest(shape, tag, body)


def copy_nest(source: SSAValue, target: SSAValue, tag: str = "copy") -> list[Operation]:
    """`target[...] = source[...]`, a nest over the shape in row-major order, each side
    addressed through its own layout (a strided view is read or written in place)."""
    shape = source.type.get_shape()

    def body(ivs):
        v = load(source, ivs, dims(len(shape)))
        return [v, store(v.result, target, ivs, dims(len(shape)))]

    return build_nest(shape, tag, body)


def lower_copy(op: memref.CopyOp) -> list[Operation]:
    return copy_nest(op.source, op.destination)


def _replace(rewriter: PatternRewriter, op: Operation, new_ops: list[Operation]) -> None:
    for new in new_ops:
        for inner in new.walk():
            inner.location = op.location
    rewriter.insert(new_ops, InsertPoint.before(op))
    rewriter.erase(op)


WINOGRAD_LOWERINGS: dict[type, Callable[..., list[Operation]]] = {
    loom.WinogradFilterOp: lower_winograd_filter, loom.WinogradInputOp: lower_winograd_input,
    loom.WinogradOutputOp: lower_winograd_output}


class LowerLoomOp(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loom.LoomComputeOp, rewriter: PatternRewriter) -> None:
        if not op.is_bufferized:
            raise LoomError(f"'{op.name}' must be bufferized first (run loom-bufferize)", op)
        if isinstance(op, loom.MatmulOp):
            _replace(rewriter, op, lower_matmul(op))
        elif isinstance(op, loom.Conv2DOp):
            _replace(rewriter, op, lower_conv2d(op))
        elif isinstance(op, loom.Pool2DOp):
            _replace(rewriter, op, lower_pool2d(op))
        elif isinstance(op, loom.MeanOp):
            _replace(rewriter, op, lower_mean(op))
        elif isinstance(op, loom.WinogradOp):
            _replace(rewriter, op, WINOGRAD_LOWERINGS[type(op)](op))
        else:
            _replace(rewriter, op, lower_elementwise(op))


class RefuseView(RewritePattern):
    """View ops exist on tensors only: loom-bufferize makes them memref views."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loom.LoomViewOp, rewriter: PatternRewriter) -> None:
        raise LoomError(f"'{op.name}' must be bufferized first (run loom-bufferize): it becomes a memref view", op)


class LowerCopy(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: memref.CopyOp, rewriter: PatternRewriter) -> None:
        _replace(rewriter, op, lower_copy(op))


@dataclass(frozen=True)
class ConvertLoomToAffinePass(ModulePass):
    name = "convert-loom-to-affine"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([LowerLoomOp(), RefuseView(), LowerCopy()]), apply_recursively=False
        ).rewrite_module(op)
