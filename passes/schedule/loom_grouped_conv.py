"""loom-grouped-conv{op=TAG width=0 tile=0}: a grouped conv2d nest (depthwise included)
-> nests that keep a tile of outputs in registers across the window, vectorized along
the output channels.

A grouped convolution (`loom.conv2d`'s `groups`) is no matmul: each output channel sums
only its group's C/groups input channels, a depthwise one (groups = C = F) a single one,
so a depthwise layer does R*S multiply-adds per output. Its cost is moving the data, and
the schedule keeps each output in a register for the whole window instead of reading and
writing it R*S*C/groups times. On an NHWC nest, convert-loom-to-affine's n, oh, ow, f, r,
s, c with `Y[n, oh, ow, f] += X[n, ih, iw, g*C/groups + c] * W[r, s, c, f]` (g = f
floordiv F/groups) becomes

```
for n, oh, owt, ft:                    # a tile of T outputs along ow, V channels along f
  for r, s (, c):                      # the window (and the group's channels, when more than 1)
    for t < T, fv < V:                 # ow = owt*T + t, f = ft*V + fv
      Y[n, oh, ow, f] += Xp[n, oh*sh + r*dh, ow*sw + s*dw, g*C/groups + c] * W[r, s, c, f]
```

tagged "grouped_conv", where loom-default then vectorizes fv (W's and Y's channels, and
X's: consecutive in a depthwise layer, one value of a group where V divides F/groups),
unrolls t, and keeps the T vectors of Y in registers across r, s and c (loom-hoist): per
tap a vector of W serves T outputs. With padding, the outputs whose windows lie inside X
read X in place (Xp = X, shifted by the padding); the rows above and below them and the
columns beside them (`regions`) read staged boxes of the padded input, each a buffer of
its own zeroed with X's part copied in (nests tagged "grouped.pad"), freed after: a
copy of the border's rows and columns, not of X (where no output's window lies inside X,
one box of all of it).

Extents that do not split: the columns past the last whole tile of T get a nest of their
own with a tile of what is left, and the channels past the last whole V a nest whose fv
runs over what is left; each nest is tagged "grouped_conv".

Options:
- `width=V` (0: the target's vector of the element type, `passes.support.target.host()`):
  the output channels per vector, a power of two; where F/groups > 1 it is brought down to
  the largest power of two dividing F/groups (a vector's channels then read one element
  of X); 1 where an output channel sums several channels of X and F/groups is 1 (X's
  channel then moves by C/groups along f).
- `tile=T` (0: 8): the outputs along ow kept in registers together, at most the target's
  vector registers minus 4 (W's vector, X's and the loop's own).

Refused with a LoomError at the nest (`op=` given), else skipped with a remark: a nest
that is not a grouped conv2d's textbook nest (`loom_im2col.match_conv2d` says why), an
NCHW one (its channels are not contiguous: the torch backend and `@loom.jit` give NHWC).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr
from xdsl.passes import ModulePass

from passes.analysis.loop_utils import raise_problems
from passes.conversion.convert_loom_to_affine import accumulate, build_nest, group_channel, load, store
from passes.schedule.loom_im2col import Conv2DNest, bordered, match_conv2d, replace_nest, rewrite_conv2d_nests
from passes.support.target import Target, host

#: the tag of the nests this pass makes, which loom-default schedules
TAG = "grouped_conv"
#: the outputs along ow kept in registers together, by default
DEFAULT_TILE = 8


def vector_width(conv: Conv2DNest, target: Target, width: int = 0) -> int:
    """V: `width` (or the target's lanes of the element type), brought down so that a
    vector's output channels read one element of X or consecutive ones (module docstring)."""
    lanes = width or target.lanes(conv.y.type.get_element_type().bitwidth // 8)
    per_group = conv.f // conv.groups
    if per_group == 1:
        return lanes if conv.c == 1 else 1
    v = 1
    while v * 2 <= lanes and per_group % (v * 2) == 0:
        v *= 2
    return v


def output_tile(conv: Conv2DNest, target: Target, tile: int = 0) -> int:
    """T: `tile` (or DEFAULT_TILE), at most the registers left for Y and at most Wo."""
    return max(1, min(tile or DEFAULT_TILE, target.vector_registers - 4, conv.wo))


@dataclass(frozen=True)
class _Source:
    """What a nest reads X from: X itself, or a staged box of the padded input (rows and
    columns from `origin` on, in the padded input's coordinates: X's padding shifts X's
    own origin to (ph, pw))."""

    buffer: SSAValue
    origin: tuple[int, int]


def _nest(conv: Conv2DNest, source: _Source, oh: tuple[int, int], ow: tuple[int, int], f: tuple[int, int],
          t: int, v: int) -> list[Operation]:
    """The nest over the rows oh[0] <= oh < oh[1], the columns ow[0] <= ow < ow[1] in tiles
    of `t` and the channels f[0] <= f < f[1] in vectors of `v` (each range whole tiles or
    one partial one), reading X from `source`."""
    (sh, sw), (dh, dw) = conv.strides, conv.dilations
    tiles, vectors = (ow[1] - ow[0]) // t, (f[1] - f[0]) // v
    # (a loop of one iteration left out: c with one channel per group, t and fv of 1)
    inner = [(name, extent) for name, extent in (("c", conv.c), ("t", t), ("fv", v)) if extent > 1]
    extents = [conv.n, oh[1] - oh[0], tiles, vectors, conv.r, conv.s, *(e for _, e in inner)]
    names = ["n", "oh", "owt", "ft", "r", "s", *(name for name, _ in inner)]
    d = [AffineExpr.dimension(i) for i in range(len(extents))]
    n, i, owt, ft, r, s = d[:6]
    c, tt, fv = (d[names.index(name)] if name in names else AffineExpr.constant(0) for name in ("c", "t", "fv"))
    j = owt * t + tt
    row, col, ch = _plus(i, oh[0]), _plus(j, ow[0]), _plus(ft * v + fv, f[0])
    per_group = conv.f // conv.groups
    if per_group > 1:
        # a vector's channels lie in one group (V divides F/groups, and f[0] is whole
        # vectors): X's channel is its first one's, the same in every lane
        assert per_group % v == 0 and f[0] % v == 0
        x_channel = group_channel(_plus(ft * v, f[0]), c, per_group, conv.c)
    else:
        x_channel = group_channel(ch, c, per_group, conv.c)
    # (the constants folded, so that a nest reads as it runs: X's row oh*sh + r*dh - ph)
    x_at = [n, _plus(i * sh + r * dh, oh[0] * sh - source.origin[0]),
            _plus(j * sw + s * dw, ow[0] * sw - source.origin[1]), x_channel]

    def body(ivs: list[SSAValue]) -> list[Operation]:
        lx, lw = load(source.buffer, ivs, x_at), load(conv.w, ivs, [r, s, c, ch])
        ly = load(conv.y, ivs, [n, row, col, ch])
        sums = accumulate(ly.result, lx.result, lw.result)
        return [lx, lw, ly, *sums, store(sums[-1].results[0], conv.y, ivs, [n, row, col, ch])]

    return build_nest(extents, TAG, body, names)


def _plus(e: AffineExpr, k: int) -> AffineExpr:
    return e + k if k else e


def _split(lo: int, hi: int, step: int) -> list[tuple[tuple[int, int], int]]:
    """[lo, hi) as whole steps, then what is left as one step of its own."""
    step = min(step, hi - lo)
    whole = lo + (hi - lo) // step * step if step else lo
    return [(r, k) for r, k in (((lo, whole), step), ((whole, hi), hi - whole)) if r[1] > r[0]]


def inside(outputs: int, extent: int, window: int, stride: int, dilation: int, pad: int) -> tuple[int, int]:
    """[lo, hi): the outputs of one spatial dimension whose whole window lies inside the
    input (none: lo == hi)."""
    lo = -(-pad // stride)
    hi = min(outputs, (pad + extent - 1 - (window - 1) * dilation) // stride + 1)
    return (lo, hi) if lo < hi else (0, 0)


def _staged_box(conv: Conv2DNest, oh: tuple[int, int], ow: tuple[int, int], name: str) -> tuple[list[Operation], _Source]:
    """The box of the padded input the outputs oh x ow read, in a buffer of its own: zeroed,
    then the part of X inside it copied in (`bordered`, nests tagged "grouped.pad")."""
    (sh, sw), (ph, pw), (dh, dw) = conv.strides, conv.padding, conv.dilations
    rows = (oh[0] * sh, (oh[1] - 1) * sh + (conv.r - 1) * dh + 1)
    cols = (ow[0] * sw, (ow[1] - 1) * sw + (conv.s - 1) * dw + 1)
    channels = conv.c * conv.groups
    # the rows and columns of X in the box (padded coordinates)
    real_rows = (max(rows[0], ph), min(rows[1], ph + conv.h))
    real_cols = (max(cols[0], pw), min(cols[1], pw + conv.width))
    n, i, j, c = (AffineExpr.dimension(k) for k in range(4))
    ops, buffer = bordered(conv.x, [conv.n, rows[1] - rows[0], cols[1] - cols[0], channels],
                           (n, _plus(i, real_rows[0] - rows[0]), _plus(j, real_cols[0] - cols[0]), c), name,
                           ["n", "h", "w", "c"], "grouped.pad",
                           [conv.n, max(0, real_rows[1] - real_rows[0]), max(0, real_cols[1] - real_cols[0]), channels],
                           (0, real_rows[0] - ph, real_cols[0] - pw, 0))
    return ops, _Source(buffer, (rows[0], cols[0]))


def regions(conv: Conv2DNest) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """(name, rows, columns) of the outputs: those whose windows lie inside X ("inside"),
    then the top and bottom rows and the left and right columns beside them whose windows
    cross the padded border; one region of all of them where none is inside."""
    (ph, pw) = conv.padding
    everything = (0, conv.ho), (0, conv.wo)
    if not (ph or pw):
        return [("inside", *everything)]
    rows = inside(conv.ho, conv.h, conv.r, conv.strides[0], conv.dilations[0], ph)
    cols = inside(conv.wo, conv.width, conv.s, conv.strides[1], conv.dilations[1], pw)
    if rows == (0, 0) or cols == (0, 0):
        return [("padded", *everything)]
    boxes = [("inside", rows, cols), ("top", (0, rows[0]), everything[1]), ("bottom", (rows[1], conv.ho), everything[1]),
             ("left", rows, (0, cols[0])), ("right", rows, (cols[1], conv.wo))]
    return [(name, oh, ow) for name, oh, ow in boxes if oh[1] > oh[0] and ow[1] > ow[0]]


def rewrite(conv: Conv2DNest, target: Target, width: int = 0, tile: int = 0) -> str:
    """Replace the nest; returns the remark."""
    v, t = vector_width(conv, target, width), output_tile(conv, target, tile)
    ops: list[Operation] = []
    after: list[Operation] = []
    nests, staged = 0, 0
    for name, oh, ow in regions(conv):
        if name == "inside":
            source = _Source(conv.x, conv.padding)
        else:
            made, source = _staged_box(conv, oh, ow, f"x_{name}")
            ops += made
            after.append(memref.DeallocOp.get(source.buffer))
            staged += math.prod(source.buffer.type.get_shape())
        for cols, tt in _split(*ow, t):
            for chans, vv in _split(0, conv.f, v):
                ops += _nest(conv, source, oh, cols, chans, tt, vv)
                nests += 1
    replace_nest(conv.nest, ops, after)
    x_size = conv.n * conv.h * conv.width * conv.c * conv.groups
    border = (f"the outputs whose windows cross the zero border read staged copies of what they read ({staged} "
              f"elements, {staged / x_size:.0%} of X), the others X in place; " if staged else "")
    return (f"nest 'conv2d' {conv.describe()}: {border}tiles of {t} outputs along ow x {v} channels along f, "
            f"kept in registers across the window{' and the group' if conv.c > 1 else ''}; {nests} nest"
            f"{'s' * (nests > 1)} '{TAG}' (the border's and the columns and channels past the last whole tile "
            f"in their own)")


def match(nest: affine.ForOp) -> Conv2DNest | str:
    """The grouped conv2d this pass rewrites, or why the nest is not one."""
    conv = match_conv2d(nest, grouped=True)
    if isinstance(conv, str):
        return conv
    if conv.groups == 1:
        return "it is not grouped (groups = 1: loom-direct-conv or loom-im2col schedule it)"
    if conv.layout != "nhwc":
        return "it is NCHW: its channels are not contiguous (the torch backend and @loom.jit give NHWC)"
    return conv


@dataclass(frozen=True)
class LoomGroupedConvPass(ModulePass):
    name = "loom-grouped-conv"

    op: str | None = None
    width: int = 0
    tile: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        raise_problems(self.name, [
            f"option 'width' must be 0 (the target's) or a power of two, got {self.width}"
            if self.width < 0 or self.width & (self.width - 1) else None,
            f"option 'tile' must be 0 (the default, {DEFAULT_TILE}) or more, got {self.tile}" if self.tile < 0 else None])
        target = host()
        rewrite_conv2d_nests(op, self.op, self.name, lambda conv: rewrite(conv, target, self.width, self.tile),
                             match=match, what="grouped conv2d")
