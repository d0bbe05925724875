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
tap a vector of W serves T outputs. Xp is X with its zero border written into a buffer
(nests tagged "grouped.pad") when there is padding, so that no read needs a guard.

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

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import affine, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr
from xdsl.passes import ModulePass

from passes.analysis.loop_utils import nest_tag, perfect_band, raise_problems, select_nests
from passes.conversion.convert_loom_to_affine import accumulate, build_nest, group_channel, load, store
from passes.schedule.loom_im2col import Conv2DNest, bordered, match_conv2d, replace_nest
from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
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


def _nest(conv: Conv2DNest, source: SSAValue, staged: bool, ow: tuple[int, int], f: tuple[int, int],
          t: int, v: int) -> list[Operation]:
    """The nest over the columns ow[0] <= ow < ow[1] in tiles of `t` and the channels
    f[0] <= f < f[1] in vectors of `v` (each range whole tiles or one partial one)."""
    (sh, sw), (ph, pw), (dh, dw) = conv.strides, conv.padding, conv.dilations
    tiles, vectors = (ow[1] - ow[0]) // t, (f[1] - f[0]) // v
    channels = conv.c > 1
    extents = [conv.n, conv.ho, tiles, vectors, conv.r, conv.s, *([conv.c] * channels), t, v]
    names = ["n", "oh", "owt", "ft", "r", "s", *(["c"] * channels), "t", "fv"]
    d = [AffineExpr.dimension(i) for i in range(len(extents))]
    n, oh, owt, ft, r, s = d[:6]
    c = d[6] if channels else AffineExpr.constant(0)
    tt, fv = d[-2:]
    col = owt * t + tt + ow[0]
    ch = ft * v + fv + f[0]
    row_at, col_at = oh * sh + r * dh, col * sw + s * dw
    if not staged:
        row_at, col_at = row_at - ph, col_at - pw
    x_at = [n, row_at, col_at, group_channel(ch, c, conv.f // conv.groups, conv.c)]

    def body(ivs: list[SSAValue]) -> list[Operation]:
        lx, lw, ly = load(source, ivs, x_at), load(conv.w, ivs, [r, s, c, ch]), load(conv.y, ivs, [n, oh, col, ch])
        sums = accumulate(ly.result, lx.result, lw.result)
        return [lx, lw, ly, *sums, store(sums[-1].results[0], conv.y, ivs, [n, oh, col, ch])]

    return build_nest(extents, TAG, body, names)


def _split(lo: int, hi: int, step: int) -> list[tuple[tuple[int, int], int]]:
    """[lo, hi) as whole steps, then what is left as one step of its own."""
    whole = lo + (hi - lo) // step * step
    return [(r, k) for r, k in (((lo, whole), step), ((whole, hi), hi - whole)) if r[1] > r[0]]


def rewrite(conv: Conv2DNest, target: Target, width: int = 0, tile: int = 0) -> str:
    """Replace the nest; returns the remark."""
    v, t = vector_width(conv, target, width), output_tile(conv, target, tile)
    (ph, pw) = conv.padding
    ops: list[Operation] = []
    after: list[Operation] = []
    source, staged = conv.x, bool(ph or pw)
    if staged:
        d = [AffineExpr.dimension(i) for i in range(4)]
        made, source = bordered(conv.x, [conv.n, conv.h + 2 * ph, conv.width + 2 * pw, conv.c * conv.groups],
                                (d[0], d[1] + ph, d[2] + pw, d[3]), "x_padded", ["n", "h", "w", "c"], "grouped.pad")
        ops += made
        after.append(memref.DeallocOp.get(source))
    nests = 0
    for cols, tt in _split(0, conv.wo, t):
        for chans, vv in _split(0, conv.f, v):
            ops += _nest(conv, source, staged, cols, chans, tt, vv)
            nests += 1
    replace_nest(conv.nest, ops, after)
    border = f"its input staged with its zero border ({conv.n}x{conv.h + 2 * ph}x{conv.width + 2 * pw}x" \
             f"{conv.c * conv.groups}), " if staged else ""
    return (f"nest 'conv2d' {conv.describe()}: {border}tiles of {t} outputs along ow x {v} channels along f, "
            f"kept in registers across the window{' and the group' if conv.c > 1 else ''}; {nests} nest"
            f"{'s' * (nests > 1)} '{TAG}' (the columns and channels past the last whole tile in their own)")


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
        found = [(nest, match(nest)) for nest in select_nests(op, self.op, self.name)]
        refused = [(nest, why) for nest, why in found if isinstance(why, str)]
        if self.op is not None and refused:
            nest, why = refused[0]
            raise LoomError(f"{self.name}: cannot rewrite nest '{nest_tag(nest) or 'untagged'}': {why}", nest)
        if len(refused) == len(found):
            seven = [(n, c) for n, c in refused if len(perfect_band(n)) == 7]
            why = ("; ".join(f"nest '{nest_tag(n) or 'untagged'}': {c}" for n, c in seven) if seven
                   else "no nest has the 7 loops of conv2d's n, oh, ow, f, r, s, c")
            raise LoomError(f"{self.name}: no grouped conv2d nest to rewrite: {why}",
                            (seven or found)[0][0] if found else None)
        for nest, conv in found:
            if isinstance(conv, str):
                remark(self.name, nest, f"nest '{nest_tag(nest) or 'untagged'}' skipped: {conv}", missed=True)
            else:
                remark(self.name, nest, rewrite(conv, target, self.width, self.tile))
