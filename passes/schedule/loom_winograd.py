"""loom-winograd{tile=0|2|4}: a 3x3 stride-1 conv2d -> Winograd's F(m x m, 3 x 3): the
filter and the input tiles transformed, a batched matmul of (m + 2)^2 products over the
channels, and the output tiles transformed back (Lavin and Gray 2016;
dialects/winograd.py has the matrices). The multiplications of the matmul are 4/9 (m = 2)
or 1/4 (m = 4) of the direct convolution's, for transforms that cost a few additions per
element.

It works on the loom ops on tensors, before loom-bufferize:

```mlir
%y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x56x56x64xf32>, tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32>
// loom-winograd{tile=4} makes it
%u = loom.winograd_filter %w {tile = 4 : i64} : tensor<3x3x64x64xf32> -> tensor<36x64x64xf32>
%v = loom.winograd_input %x {tile = 4 : i64, padding = array<i64: 1, 1>} : tensor<1x56x56x64xf32> -> tensor<36x196x64xf32>
%m = loom.matmul %v, %u : (tensor<36x196x64xf32>, tensor<36x64x64xf32>) -> tensor<36x196x64xf32>
%y = loom.winograd_output %m {tile = 4 : i64} : tensor<36x196x64xf32> -> tensor<1x56x56x64xf32>
```

The batched matmul then gets the matmul schedule (loom-default), and the three transforms
are nests over the tiles with the channels innermost, vectorized (convert-loom-to-affine).
Where the filter is a constant the caller knows (the torch backend's folded weights),
the caller transforms it once, in float64, and passes U itself (`compiler.frontends`).

Winograd's transforms round differently from the direct sum: the result is not the
direct convolution's up to reassociation, and its error grows with m (the matrices'
entries do). So the pass runs only where asked: `compile(..., algorithms="fast")`,
the torch backend's `algorithms="fast"`, or this flag in a pipeline. The bound measured on
ResNet-18's layers is in docs/guide/winograd.md.

`tile=0` (the default): the cost model chooses per conv (`cost_model.choose_winograd`:
the matmul's multiply-adds plus the transforms' and the transformed filter's traffic,
against the direct convolution's), and keeps the direct convolution where that is
estimated faster; the remark gives the estimates. `tile=2` or `tile=4` rewrites every
conv that can be rewritten with that tile.

Skipped with a remark: a conv2d that is not NHWC (the transforms vectorize along the
channels, innermost only there), not a 3x3 window, strided or dilated, or not f32/f64
(bf16 and int8 would need their transformed tiles rounded to their own type, which
costs the precision they have least of). Refused (LoomError): `tile` other than 0, 2 or
4, a conv2d already bufferized (the pass runs on tensors).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, TensorType, f32, f64, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern

from dialects import loom, winograd
from passes.analysis import cost_model
from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from passes.support.target import host

PASS = "loom-winograd"


def unsupported(conv: loom.Conv2DOp) -> str:
    """Why `conv` cannot be a Winograd F(m x m, 3 x 3) convolution, or "" when it can."""
    element = conv.ins[0].type.get_element_type()  # (bf16 and int8 convs sum into f32 and i32)
    strides, _, dilations = conv.conv_params()
    c, r, s = conv.window()
    if conv.layout_name() != "nhwc":
        return "NCHW: the transforms vectorize along the channels, innermost only in NHWC"
    if (r, s) != (3, 3):
        return f"a {r}x{s} window: Winograd F(m x m, 3 x 3) is for 3x3 windows"
    if strides != (1, 1) or dilations != (1, 1):
        return f"strides {list(strides)}, dilations {list(dilations)}: Winograd's tiles need stride 1, dilation 1"
    if element not in (f32, f64):
        return (f"{element} inputs: the transformed tiles would be rounded to them "
                f"(only f32 and f64 are transformed)")
    if conv.filter_panel():
        return "its filter is in panels (packed for the direct convolution), not HWCF"
    return ""


def winograd_ops(x: SSAValue, u: SSAValue, m: int, padding: tuple[int, int],
                 out: TensorType) -> list[Operation]:
    """The input transform, the batched matmul and the output transform of a conv whose
    filter is already transformed (`u`: alpha^2 x C x F); the last op's result is the
    convolution's (`out`, NHWF)."""
    element = out.get_element_type()
    n, ho, wo, f = out.get_shape()
    alpha2 = winograd.points(m) ** 2
    p = winograd.tile_count(n, ho, wo, m)
    c = x.type.get_shape()[3]
    tile = {"tile": IntegerAttr(m, i64)}
    v = loom.WinogradInputOp([x], TensorType(element, [alpha2, p, c]),
                             properties={**tile, "padding": DenseArrayBase.from_list(i64, list(padding))})
    mm = loom.MatmulOp([v.res[0], u], TensorType(element, [alpha2, p, f]))
    y = loom.WinogradOutputOp([mm.res[0]], out, properties=tile)
    return [v, mm, y]


def filter_op(w: SSAValue, m: int) -> loom.WinogradFilterOp:
    """U = the filter transform of the HWCF filter `w`."""
    _, _, c, f = w.type.get_shape()
    return loom.WinogradFilterOp([w], TensorType(w.type.get_element_type(), [winograd.points(m) ** 2, c, f]),
                                 properties={"tile": IntegerAttr(m, i64)})


@dataclass
class RewriteConv(RewritePattern):
    tile: int

    @op_type_rewrite_pattern
    def match_and_rewrite(self, conv: loom.Conv2DOp, rewriter: PatternRewriter) -> None:
        if conv.is_bufferized:
            raise LoomError(f"{PASS} runs on tensors, before loom-bufferize: this conv2d is already bufferized", conv)
        why = unsupported(conv)
        if why:
            remark(PASS, conv, f"kept the direct convolution: {why}", missed=True)
            return
        x, w = conv.ins
        n, ho, wo, f = conv.output_type.get_shape()
        c = x.type.get_shape()[3]
        choice = cost_model.choose_winograd(n, ho, wo, c, f, host(), (self.tile,) if self.tile else winograd.TILES)
        if not choice.tile:
            remark(PASS, conv, f"kept the direct convolution: {choice.why}", missed=True, estimates=choice.estimates)
            return
        u = filter_op(w, choice.tile)
        _, padding, _ = conv.conv_params()
        ops = [u, *winograd_ops(x, u.res[0], choice.tile, padding, conv.output_type)]
        name = conv.res[0].name_hint or "y"
        for op, suffix in zip(ops, ("_u", "_v", "_m", "")):  # the filter, the input, the products, the result
            op.res[0].name_hint = name + suffix
        rewriter.replace_op(conv, ops, [ops[-1].res[0]])
        remark(PASS, conv, f"F({choice.tile}x{choice.tile}, 3x3): {choice.why}", tile=choice.tile,
               estimates=choice.estimates)


@dataclass(frozen=True)
class LoomWinogradPass(ModulePass):
    name = PASS

    tile: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.tile not in (0, *winograd.TILES):
            raise LoomError(f"{PASS}: tile must be 0 (the cost model's choice) or the output tile's side, "
                            f"{' or '.join(map(str, winograd.TILES))}, got {self.tile}")
        PatternRewriteWalker(RewriteConv(self.tile), apply_recursively=False).rewrite_module(op)
