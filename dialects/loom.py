"""The loom dialect: dense tensor kernels (matmul, conv2d) and elementwise epilogues.

Every compute op has two forms.

Value semantics on builtin tensors, what users and the Python API write:

```mlir
%c = loom.matmul %a, %b : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
%y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1>} : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x16x16xf32>
%s = loom.add %c, %bias : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<64x16xf32>
%r = loom.relu %s : tensor<64x16xf32>
```

Destination-passing style on memrefs, after `loom-bufferize`:

```mlir
loom.matmul ins(%a, %b : memref<64x32xf32>, memref<32x16xf32>) outs(%c : memref<64x16xf32>)
```

Shape rules live in `result_shape`, shared by the verifiers, bufferization, the lowering
to loops and the numpy reference; element types in `check_element_types`: f32 and f64
everywhere, bf16 (summed in f32) and i8/ui8 (summed in i32) into matmul and conv2d, i32
through the elementwise ops, and the conversions between them:

```mlir
%c = loom.matmul %x, %w : (tensor<64x32xui8>, tensor<32x16xi8>) -> tensor<64x16xi32>
%y = loom.dequantize %c, %s, %z {axis = 1 : i64} : (tensor<64x16xi32>, tensor<16xf32>, tensor<16xi32>) -> tensor<64x16xf32>
%q = loom.quantize %y, %so, %zo : (tensor<64x16xf32>, tensor<f32>, tensor<i32>) -> tensor<64x16xui8>
%h = loom.cast %y : tensor<64x16xf32> -> tensor<64x16xbf16>
```

View ops, on tensors only, which `loom-bufferize` makes memref views (strided layouts)
of their operand's buffer, with no copy; `loom.contiguous` is the one that copies:

```mlir
%t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
%s = loom.slice %a {offsets = array<i64: 0, 1>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
%b = loom.broadcast_to %v : tensor<8xf32> -> tensor<4x8xf32>
%r = loom.reshape %a : tensor<4x8xf32> -> tensor<2x16xf32>
%c = loom.contiguous %t : tensor<8x4xf32> -> tensor<8x4xf32>
```

A tensor argument passed as a numpy view carries its element strides:
`%a: tensor<4x4xf32> {loom.buffer_layout = strided<[1, 4]>}` (`argument_buffer_type`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
    StridedLayoutAttr,
    StringAttr,
    Signedness,
    TensorType,
    bf16,
    f32,
    f64,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from dialects.dtypes import FILTER_GROUPS, NUMPY_NAMES
from dialects.winograd import TILES, points, tile_count
from dialects.layout import may_alias, memref_root, reshape_strides, row_major_strides, strided_memref, unknown_origin

ShapedT = TensorType | MemRefType

ui8 = IntegerType(8, Signedness.UNSIGNED)

#: every element type a loom op takes or gives (the lowering, the JIT and the numpy
#: reference know these; f16/f80/f128 would fail late, in LLVM or in numpy)
ELEMENT_TYPES = (f32, f64, bf16, i8, ui8, i32)
assert [str(t) for t in ELEMENT_TYPES] == list(NUMPY_NAMES)  # their numpy dtypes: dialects/dtypes.py

#: matmul and conv2d: the inputs' element type -> the result's, in which the products are
#: summed (bf16 in f32, as oneDNN and torch do; i8/ui8 exactly in i32, which wraps)
ACCUMULATOR = {f32: f32, f64: f64, bf16: f32, i8: i32, ui8: i32}

#: the element types of the elementwise ops (the epilogues of an f32 or i32 result)
ELEMENTWISE_TYPES = (f32, f64, i32)

#: loom.cast: the input's element type -> the result's it casts to
CASTS = {f32: (bf16,), bf16: (f32,), i32: (f32,)}

#: loom.quantize's results and loom.dequantize's inputs: (least, greatest) value
QUANTIZED = {i8: (-128, 127), ui8: (0, 255)}


def type_names(types, conjunction: str = "and") -> str:
    """Element types in a message: "f32, f64 and bf16" ("or" as `conjunction`)."""
    names = [str(t) for t in types]
    return ", ".join(names[:-1]) + f" {conjunction} {names[-1]}" if len(names) > 1 else names[0]


def check_element_type(what: str, elt: Attribute) -> None:
    """Refuse an element type no loom op knows."""
    if elt not in ELEMENT_TYPES:
        raise VerifyException(f"{what} has element type {elt}: loom ops support {type_names(ELEMENT_TYPES)}")


def _static_layout(t: MemRefType) -> bool:
    """Whether the type alone fixes which elements of its buffer a memref reaches: the
    identity layout, or a strided one with no dynamic offset or stride."""
    layout = t.layout
    if isinstance(layout, NoneAttr):
        return True
    return isinstance(layout, StridedLayoutAttr) and all(
        isinstance(x, IntAttr) for x in (layout.offset, *layout.strides.data)
    )


def _fmt_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """numpy broadcasting of two shapes; None when they do not broadcast."""
    rank = max(len(a), len(b))
    pa = (1,) * (rank - len(a)) + tuple(a)
    pb = (1,) * (rank - len(b)) + tuple(b)
    out: list[int] = []
    for x, y in zip(pa, pb):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)  # a 1 stretches to the other extent, 0 included
    return tuple(out)


def conv2d_output_hw(
    h: int, w: int, r: int, s: int, strides, padding, dilations
) -> tuple[int, int]:
    """Ho = (H + 2*ph - dh*(R-1) - 1) // sh + 1, and the same for W."""
    ho = (h + 2 * padding[0] - dilations[0] * (r - 1) - 1) // strides[0] + 1
    wo = (w + 2 * padding[1] - dilations[1] * (s - 1) - 1) // strides[1] + 1
    return ho, wo


def pair_property(op: IRDLOperation, name: str, least: int, default: tuple[int, int] | None) -> tuple[int, int]:
    """Property `name` of `op`, `array<i64: a, b>` with a, b >= `least`; `default` where
    it is absent (None: it is required)."""
    attr = op.properties.get(name)
    if attr is None:
        if default is None:
            raise VerifyException(f"attribute '{name}' is required: array<i64: a, b> with a, b >= {least}")
        return default
    form = f"attribute '{name}' must be array<i64: a, b> with a, b >= {least}"
    if not isinstance(attr, DenseArrayBase) or attr.elt_type != i64:
        raise VerifyException(f"{form}, got {attr}")
    vals = attr.get_values()
    if len(vals) != 2 or min(vals) < least:
        raise VerifyException(f"{form}, got {attr}")
    return (int(vals[0]), int(vals[1]))


class LoomComputeOp(IRDLOperation):
    """Common structure of loom compute ops: `ins` operands, then either a tensor result
    (value form) or one `outs` memref operand (destination-passing form)."""

    OPERAND_NAMES: ClassVar[tuple[str, ...]]
    """What the inputs are called in diagnostics, in order."""

    TYPES: ClassVar[tuple[Attribute, ...]] = ELEMENTWISE_TYPES
    """The element types an op of the default `check_element_types` computes in."""

    IN_PLACE: ClassVar[bool] = False
    """Whether an output element depends only on the input elements at its own index, so
    that the output may be written over an input of its shape (numpy's `out=`)."""

    # Any type here: `verify_` checks them, naming the operand (IRDL's message would not).
    ins = var_operand_def()
    outs = var_operand_def()
    res = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_type: Attribute | None = None,
        out: SSAValue | None = None,
        properties: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[inputs, [out] if out is not None else []],
            result_types=[[result_type] if result_type is not None else []],
            properties=properties or {},
        )

    # ---- shape rules -------------------------------------------------------

    def result_shape(self, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
        """The result shape from the input shapes; raises VerifyException naming the
        offending operand."""
        raise NotImplementedError

    @property
    def is_bufferized(self) -> bool:
        return len(self.outs) == 1

    @property
    def output_type(self) -> ShapedT:
        t = self.outs[0].type if self.is_bufferized else self.res[0].type
        assert isinstance(t, TensorType | MemRefType)
        return t

    def _describe(self, i: int) -> str:
        return f"operand #{i} ({self.OPERAND_NAMES[i]})"

    def verify_(self) -> None:
        n = len(self.OPERAND_NAMES)
        if len(self.ins) != n:
            raise VerifyException(f"expects {n} input operands, got {len(self.ins)}")
        if self.is_bufferized == bool(self.res):
            raise VerifyException(
                "takes either a tensor result (value form) or one outs "
                "memref (destination-passing form), not both and not neither"
            )
        if len(self.outs) > 1 or len(self.res) > 1:
            raise VerifyException(f"takes one {'outs operand' if self.outs else 'result'}, got "
                                  f"{max(len(self.outs), len(self.res))}")
        kind = MemRefType if self.is_bufferized else TensorType
        kind_name = "memref" if self.is_bufferized else "tensor"
        which = "outs operand" if self.is_bufferized else "result"
        out_t = (self.outs if self.is_bufferized else self.res)[0].type
        if not isinstance(out_t, kind):
            raise VerifyException(f"{which} must be a {kind_name}, got {out_t}")
        for i, v in enumerate(self.ins):
            if not isinstance(v.type, kind):
                raise VerifyException(f"{self._describe(i)} must be a {kind_name}, got {v.type}")
            check_element_type(self._describe(i), v.type.get_element_type())
        check_element_type(which, out_t.get_element_type())
        self.check_element_types([v.type.get_element_type() for v in self.ins], out_t.get_element_type(), which)
        shapes = [tuple(v.type.get_shape()) for v in self.ins]
        for i, s in enumerate(shapes):
            if any(d < 0 for d in s):
                raise VerifyException(f"{self._describe(i)} must have a static shape, got {self.ins[i].type}")
        expected = self.result_shape(shapes)
        actual = tuple(out_t.get_shape())
        if expected != actual:
            raise VerifyException(
                f"{which} has shape {_fmt_shape(actual)}, expected {_fmt_shape(expected)} "
                f"from the operand shapes ({', '.join(_fmt_shape(s) for s in shapes)})"
            )
        if self.is_bufferized:
            self._check_aliasing()

    def check_element_types(self, ins: list[Attribute], out: Attribute, which: str) -> None:
        """Refuse element types the op does not compute in, naming the operand. By
        default (the elementwise ops, the pools, mean): one of TYPES, the same everywhere."""
        for what, t in [*((self._describe(i), t) for i, t in enumerate(ins)), (which, out)]:
            if t not in self.TYPES:
                raise VerifyException(f"{what} has element type {t}: {self.name} computes in "
                                      f"{type_names(self.TYPES)}")
        for i, t in enumerate(ins):
            if t != out:
                raise VerifyException(f"{self._describe(i)} has element type {t}, expected {out} (the {which}'s)")

    def _check_aliasing(self) -> None:
        """The outs buffer must not be an input's, nor overlap one through a view: the
        loops read the inputs while they write the output (matmul's zero fill of C would
        wipe A first). Elementwise ops may write over an input with the output's shape and
        layout, which each iteration reads before it writes the same element. A buffer of
        unknown origin (`memref_root`) may be any other: only the outs value itself is
        known to be the same."""
        out = self.outs[0]
        root = memref_root(out)
        for i, v in enumerate(self.ins):
            if not may_alias(v, out):
                continue
            known = root is not None and memref_root(v) is root
            same = v is out or (known and v.type == out.type and _static_layout(out.type))
            if self.IN_PLACE and same:
                continue
            if not known and v is not out:
                which = f"the outs operand is {unknown_origin(out)}" if root is None else f"it is {unknown_origin(v)}"
                raise VerifyException(
                    f"outs operand may view the same buffer as {self._describe(i)}: {which}, which may be any "
                    f"buffer, and {self.name} needs its output to be a separate buffer"
                    f"{' or the input itself' if self.IN_PLACE else ''}"
                )
            what = "is" if v is out else "views the same buffer as"
            if not self.IN_PLACE:
                raise VerifyException(
                    f"outs operand {what} {self._describe(i)}: {self.name} reads its inputs "
                    f"while it writes the output, so the output must be a separate buffer"
                )
            raise VerifyException(
                f"outs operand {what} {self._describe(i)} with another shape or layout "
                f"({v.type} vs {out.type}): in place, the input must have the output's "
                f"shape and layout"
            )

    # ---- assembly ----------------------------------------------------------

    @classmethod
    def parse(cls, parser: Parser):
        if parser.parse_optional_keyword("ins") is not None:
            ins, _ = cls._parse_operand_group(parser)
            parser.parse_keyword("outs")
            outs, _ = cls._parse_operand_group(parser)
            attrs = parser.parse_optional_attr_dict()
            op = cls(ins, out=outs[0] if len(outs) == 1 else None, properties=attrs)
            if len(outs) != 1:
                parser.raise_error(f"'{cls.name}' takes exactly one outs operand")
            return op
        pos = parser.pos
        unresolved = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        if parser.parse_optional_punctuation("(") is None:
            # unary ops: `loom.relu %x : tensor<...>`, `loom.cast %x : tensor<...> -> tensor<...>`
            t = parser.parse_type()
            in_types, out_t = [t], t
            if parser.parse_optional_punctuation("->") is not None:
                out_t = parser.parse_type()
        else:
            in_types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
            parser.parse_punctuation(")")
            parser.parse_punctuation("->")
            out_t = parser.parse_type()
        if len(in_types) != len(unresolved):
            parser.raise_error(
                f"{len(unresolved)} operands but {len(in_types)} types", pos, parser.pos
            )
        ins = [parser.resolve_operand(u, t) for u, t in zip(unresolved, in_types)]
        return cls(ins, result_type=out_t, properties=attrs)

    @staticmethod
    def _parse_operand_group(parser: Parser):
        parser.parse_punctuation("(")
        unresolved = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation(")")
        if len(types) != len(unresolved):
            parser.raise_error(f"{len(unresolved)} operands but {len(types)} types")
        return [parser.resolve_operand(u, t) for u, t in zip(unresolved, types)], types

    def _print_attrs(self, printer: Printer) -> None:
        props = {k: v for k, v in self.properties.items() if k != "operandSegmentSizes"}
        if props:
            printer.print_string(" ")
            printer.print_attr_dict(props)

    def print(self, printer: Printer) -> None:
        if self.is_bufferized:
            printer.print_string(" ins(")
            printer.print_list(self.ins, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in self.ins], printer.print_attribute)
            printer.print_string(") outs(")
            printer.print_operand(self.outs[0])
            printer.print_string(" : ")
            printer.print_attribute(self.outs[0].type)
            printer.print_string(")")
            self._print_attrs(printer)
            return
        printer.print_string(" ")
        printer.print_list(self.ins, printer.print_operand)
        self._print_attrs(printer)
        printer.print_string(" : ")
        if len(self.ins) == 1:
            printer.print_attribute(self.ins[0].type)
            if self.ins[0].type != self.res[0].type:
                printer.print_string(" -> ")
                printer.print_attribute(self.res[0].type)
            return
        printer.print_string("(")
        printer.print_list([v.type for v in self.ins], printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.res[0].type)


class ContractionOp(LoomComputeOp):
    """matmul and conv2d: products of the two inputs summed into the result, in the
    result's element type (ACCUMULATOR: bf16 in f32, i8/ui8 in i32)."""

    def check_element_types(self, ins: list[Attribute], out: Attribute, which: str) -> None:
        for i, t in enumerate(ins):
            if t not in ACCUMULATOR:
                raise VerifyException(f"{self._describe(i)} has element type {t}: {self.name} takes "
                                      f"{type_names(ACCUMULATOR)}")
        a, b = ins
        if a != b and not (a in QUANTIZED and b in QUANTIZED):
            raise VerifyException(f"{self._describe(1)} has element type {b}, expected {a} (the "
                                  f"{self.OPERAND_NAMES[0]}'s): only i8 and ui8 mix")
        if out != ACCUMULATOR[a]:
            raise VerifyException(f"{which} has element type {out}, expected {ACCUMULATOR[a]}: {a} products "
                                  f"are summed in {ACCUMULATOR[a]}")


@irdl_op_definition
class MatmulOp(ContractionOp):
    """C = A @ B, optionally batched (rank 3, same batch size).

    ```mlir
    %c = loom.matmul %a, %b : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
    ```
    """

    name = "loom.matmul"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("lhs", "rhs")

    def result_shape(self, shapes):
        (a, b) = shapes
        if len(a) not in (2, 3):
            raise VerifyException(f"{self._describe(0)} must have rank 2 or 3 (batched), got shape {_fmt_shape(a)}")
        if len(b) != len(a):
            raise VerifyException(
                f"{self._describe(1)} has rank {len(b)}, expected {len(a)} to match lhs shape {_fmt_shape(a)}"
            )
        if len(a) == 3 and a[0] != b[0]:
            raise VerifyException(
                f"{self._describe(1)} has batch size {b[0]}, expected {a[0]} (lhs batch size)"
            )
        if a[-1] != b[-2]:
            raise VerifyException(
                f"{self._describe(1)} has shape {_fmt_shape(b)}: its dimension {len(b) - 2} "
                f"is {b[-2]}, expected K = {a[-1]} (lhs shape {_fmt_shape(a)})"
            )
        return (*a[:-1], b[-1])


@irdl_op_definition
class Conv2DOp(ContractionOp):
    """2-D convolution (cross-correlation): NCHW input, FCHW filter, NFHW output, or with
    `layout = "nhwc"` NHWC input, HWCF filter (R x S x C x F), NHWF output.

    Ho = (H + 2*ph - dh*(R-1) - 1) / sh + 1, Wo likewise.

    `groups` (1 by default; torch's `groups=`): the C input and F output channels split
    into that many groups, output channel f summing only the input channels of its own
    group, f floordiv (F/groups); the filter then holds C/groups input channels (FCHW
    F x C/groups x R x S, HWCF R x S x C/groups x F). groups = C = F is a depthwise
    convolution. A grouped filter comes in its plain layout (not in panels).

    In NHWC the filter may come in panels of NR output channels, rank 5: P x R x S x C x NR
    with F = P*NR and W[r, s, c, f] at [f floordiv NR, r, s, c, f mod NR] (`pack_filter`):
    each panel's R*S*C x NR block contiguous, the layout a direct convolution's schedule
    would pack it into (`filter_panel`; oneDNN's and IREE's weights packed ahead of time).
    Such a filter is f32 or f64. A bf16 or i8/ui8 filter comes in panels of groups, rank 6:
    P x R x S x C/G x NR x G with W[r, s, c, f] at [f floordiv NR, r, s, c floordiv G,
    f mod NR, c mod G], G the k its dot-product instruction reads per lane (FILTER_GROUPS:
    bf16 pairs for vdpbf16ps, byte quads for vpdpbusd): each panel row holds G channels of
    NR output channels side by side, the layout loom-pack's `group=G` packs B into.

    ```mlir
    %y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3>, dilations = array<i64: 1, 1>} : (tensor<1x3x224x224xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x112x112xf32>
    %y = loom.conv2d %x, %w {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x56x56x64xf32>, tensor<3x3x64x64xf32>) -> tensor<1x56x56x64xf32>
    %y = loom.conv2d %x, %wp {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x7x7x512xf32>, tensor<16x3x3x512x32xf32>) -> tensor<1x7x7x512xf32>
    %y = loom.conv2d %x, %wg {layout = "nhwc", padding = array<i64: 1, 1>} : (tensor<1x7x7x512xbf16>, tensor<16x3x3x256x32x2xbf16>) -> tensor<1x7x7x512xf32>
    %y = loom.conv2d %x, %wd {layout = "nhwc", padding = array<i64: 1, 1>, groups = 32 : i64} : (tensor<1x112x112x32xf32>, tensor<3x3x1x32xf32>) -> tensor<1x112x112x32xf32>
    ```
    """

    name = "loom.conv2d"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input", "filter")

    # Any attribute is accepted here and checked in `_pair`, so that a wrong one (a dense
    # tensor, an integer) is named in the error with the form it must have.
    strides = opt_prop_def(Attribute)
    padding = opt_prop_def(Attribute)
    dilations = opt_prop_def(Attribute)
    layout = opt_prop_def(Attribute)
    groups = opt_prop_def(Attribute)

    #: layout -> (input, filter) dimension names
    LAYOUTS: ClassVar[dict[str, tuple[str, str]]] = {"nchw": ("NCHW", "FCHW"), "nhwc": ("NHWC", "HWCF")}

    #: attribute -> (default, least value)
    PARAMS: ClassVar[dict[str, tuple[int, int]]] = {"strides": (1, 1), "padding": (0, 0), "dilations": (1, 1)}

    def _pair(self, name: str) -> tuple[int, int]:
        default, least = self.PARAMS[name]
        return pair_property(self, name, least, (default, default))

    def layout_name(self) -> str:
        """"nchw" (the default) or "nhwc"."""
        attr = self.properties.get("layout")
        if attr is None:
            return "nchw"
        if not isinstance(attr, StringAttr) or attr.data not in self.LAYOUTS:
            raise VerifyException(f'attribute \'layout\' must be "nchw" (NCHW input, FCHW filter) or "nhwc" '
                                  f"(NHWC input, HWCF filter), got {attr}")
        return attr.data

    def group_count(self) -> int:
        """`groups`, 1 where it is absent."""
        attr = self.properties.get("groups")
        if attr is None:
            return 1
        if not isinstance(attr, IntegerAttr) or attr.type != i64 or attr.value.data < 1:
            raise VerifyException(f"attribute 'groups' must be a positive i64 (the channel groups; 1: a dense "
                                  f"convolution), got {attr}")
        return attr.value.data

    def window(self) -> tuple[int, int, int]:
        """(C, R, S) of the filter, whatever the layout: C*R*S is the reduction length (C
        the channels of one group where there are groups)."""
        w = self.ins[1].type.get_shape()
        if self.layout_name() == "nchw":
            _, c, r, s = w
        else:  # R x S x C x F, or in panels P x R x S x C x NR, or P x R x S x C/G x NR x G
            r, s, c = w[-4], w[-3], w[-2]
            if len(w) == 6:
                r, s, c = w[1], w[2], w[3] * w[5]
        return c, r, s

    def filter_panel(self) -> int:
        """NR of a filter in panels (rank 5 or 6, NHWC), 0 for one in its plain layout."""
        w = self.ins[1].type.get_shape()
        return {5: w[-1], 6: w[-2]}.get(len(w), 0)

    def filter_group(self) -> int:
        """G of a filter in panels of groups (rank 6), 0 for any other."""
        w = self.ins[1].type.get_shape()
        return w[-1] if len(w) == 6 else 0

    def conv_params(self) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """(strides, padding, dilations), defaults filled in and validated."""
        return self._pair("strides"), self._pair("padding"), self._pair("dilations")

    def verify_(self) -> None:
        self.conv_params()  # a bad attribute first: the shape messages below depend on them
        self.layout_name()
        self.group_count()
        super().verify_()
        element = self.ins[1].type.get_element_type()
        group = self.filter_group()
        if self.filter_panel() and not group and element not in (f32, f64):
            raise VerifyException(f"{self._describe(1)} in panels has element type {element}: a filter in panels "
                                  f"of rank 5 is f32 or f64 (a {element} one comes in groups, rank 6)")
        if group and str(element) not in FILTER_GROUPS:
            raise VerifyException(f"{self._describe(1)} in panels of groups (rank 6) has element type {element}: a "
                                  f"filter in groups is {type_names(FILTER_GROUPS, 'or')}")
        if group and FILTER_GROUPS[str(element)] != group:
            raise VerifyException(f"{self._describe(1)} in panels of groups of {group} (its last dimension): "
                                  f"{element} filters are in groups of {FILTER_GROUPS[str(element)]}")

    def result_shape(self, shapes):
        x, w = shapes
        strides, padding, dilations = self.conv_params()
        layout = self.layout_name()
        xl, wl = self.LAYOUTS[layout]
        if len(x) != 4:
            raise VerifyException(f"{self._describe(0)} must have rank 4 ({xl}), got shape {_fmt_shape(x)}")
        if len(w) != 4 and not (len(w) in (5, 6) and layout == "nhwc"):
            panels = (" or 5 (P x R x S x C x NR, in panels) or 6 (P x R x S x C/G x NR x G, in panels of groups)"
                      if layout == "nhwc" else "")
            raise VerifyException(f"{self._describe(1)} must have rank 4 ({wl}){panels}, got shape {_fmt_shape(w)}")
        groups = self.group_count()
        if groups > 1 and len(w) != 4:
            raise VerifyException(f"{self._describe(1)} has shape {_fmt_shape(w)}: a grouped filter (groups = "
                                  f"{groups}) comes in its plain layout, rank 4 ({wl}), not in panels")
        if layout == "nchw":
            (n, c, h, wd), (f, wc, r, s) = x, w
        elif len(w) == 5:
            (n, h, wd, c), (p, r, s, wc, nr) = x, w
            f, wl = p * nr, "in panels"
        elif len(w) == 6:
            (n, h, wd, c), (p, r, s, cg, nr, g) = x, w
            f, wc, wl = p * nr, cg * g, "in panels of groups"
        else:
            (n, h, wd, c), (r, s, wc, f) = x, w
        for name, channels in (("input", c), ("output", f)):
            if channels % groups:
                raise VerifyException(f"{groups} groups do not split the {channels} {name} channels (input shape "
                                      f"{_fmt_shape(x)} ({xl}), filter shape {_fmt_shape(w)} ({wl}))")
        if wc * groups != c:
            per_group = f" per group, expected C/groups = {c // groups}" if groups > 1 else f", expected C = {c}"
            raise VerifyException(
                f"{self._describe(1)} has {wc} input channels (shape {_fmt_shape(w)}, {wl}){per_group} "
                f"from input shape {_fmt_shape(x)} ({xl})"
            )
        ho, wo = conv2d_output_hw(h, wd, r, s, strides, padding, dilations)
        if ho < 1 or wo < 1:
            raise VerifyException(
                f"{self._describe(1)} window {r}x{s} (dilations {list(dilations)}) does not fit "
                f"the padded input {h + 2 * padding[0]}x{wd + 2 * padding[1]}"
            )
        return (n, f, ho, wo) if layout == "nchw" else (n, ho, wo, f)


class Pool2DOp(LoomComputeOp):
    """What max_pool2d and avg_pool2d share: windows of the spatial dimensions (NCHW input,
    or NHWC with `layout = "nhwc"`), `window` required, `strides` the window by default,
    `padding` (at most half the window, so that every window holds an element of the input)
    0 by default; dilation 1, and the windows end inside the padded input (torch's
    ceil_mode false)."""

    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input",)

    window = opt_prop_def(Attribute)
    strides = opt_prop_def(Attribute)
    padding = opt_prop_def(Attribute)
    layout = opt_prop_def(Attribute)

    def pool_params(self) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """(window, strides, padding), defaults filled in and validated."""
        window = pair_property(self, "window", 1, None)
        strides = pair_property(self, "strides", 1, window)
        padding = pair_property(self, "padding", 0, (0, 0))
        if any(2 * p > k for p, k in zip(padding, window)):
            raise VerifyException(f"padding {list(padding)} is more than half the window {list(window)}: a window "
                                  "would hold only the padded border")
        return window, strides, padding

    def layout_name(self) -> str:
        """"nchw" (the default) or "nhwc"."""
        attr = self.properties.get("layout")
        if attr is None:
            return "nchw"
        if not isinstance(attr, StringAttr) or attr.data not in ("nchw", "nhwc"):
            raise VerifyException(f'attribute \'layout\' must be "nchw" or "nhwc", got {attr}')
        return attr.data

    def verify_(self) -> None:
        self.pool_params()
        self.layout_name()
        super().verify_()

    def result_shape(self, shapes):
        (x,) = shapes
        (r, s), strides, padding = self.pool_params()
        nhwc = self.layout_name() == "nhwc"
        if len(x) != 4:
            raise VerifyException(f"{self._describe(0)} must have rank 4 ({'NHWC' if nhwc else 'NCHW'}), got shape "
                                  f"{_fmt_shape(x)}")
        n, c, h, w = (x[0], x[3], x[1], x[2]) if nhwc else x
        ho, wo = conv2d_output_hw(h, w, r, s, strides, padding, (1, 1))
        if ho < 1 or wo < 1:
            raise VerifyException(f"window {r}x{s} does not fit the padded input {h + 2 * padding[0]}x"
                                  f"{w + 2 * padding[1]}")
        return (n, ho, wo, c) if nhwc else (n, c, ho, wo)


@irdl_op_definition
class MaxPool2DOp(Pool2DOp):
    """2-D max pooling (`Pool2DOp`'s windows): the greatest element of each window, the
    padded border never chosen (torch's `max_pool2d`; a NaN in a window is its maximum);
    f32, f64 and i32.

    ```mlir
    %y = loom.max_pool2d %x {window = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, layout = "nhwc"} : tensor<1x112x112x64xf32> -> tensor<1x56x56x64xf32>
    ```
    """

    name = "loom.max_pool2d"


@irdl_op_definition
class AvgPool2DOp(Pool2DOp):
    """2-D average pooling (`Pool2DOp`'s windows): each window's sum over its count, the
    window's area, or with `count_include_pad = false` the elements inside the input
    (torch's `avg_pool2d`); f32 and f64.

    ```mlir
    %y = loom.avg_pool2d %x {window = array<i64: 2, 2>} : tensor<1x64x8x8xf32> -> tensor<1x64x4x4xf32>
    ```
    """

    name = "loom.avg_pool2d"
    TYPES: ClassVar[tuple[Attribute, ...]] = (f32, f64)

    count_include_pad = opt_prop_def(Attribute)

    def counts_padding(self) -> bool:
        attr = self.properties.get("count_include_pad")
        if attr is None:
            return True
        if not isinstance(attr, IntegerAttr) or attr.type != IntegerType(1):
            raise VerifyException(f"attribute 'count_include_pad' must be true or false, got {attr}")
        return bool(attr.value.data)

    def verify_(self) -> None:
        self.counts_padding()
        super().verify_()


@irdl_op_definition
class MeanOp(LoomComputeOp):
    """The mean over `axes` (distinct, in range), each kept with size 1 (numpy's `keepdims`):
    a global average pool is the mean over H and W. f32 or f64; summed in the element type,
    then multiplied by 1 / (the count).

    ```mlir
    %m = loom.mean %x {axes = array<i64: 1, 2>} : tensor<8x7x7x512xf32> -> tensor<8x1x1x512xf32>
    ```
    """

    name = "loom.mean"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input",)
    TYPES: ClassVar[tuple[Attribute, ...]] = (f32, f64)

    axes = opt_prop_def(Attribute)

    def reduced(self, rank: int) -> tuple[int, ...]:
        """The axes, validated against the input's rank (negative ones counted from the end)."""
        attr = self.properties.get("axes")
        form = "attribute 'axes' must be array<i64: ...> of distinct axes of the input"
        if not isinstance(attr, DenseArrayBase) or attr.elt_type != i64:
            raise VerifyException(f"{form}, got {attr}")
        axes = [int(a) for a in attr.get_values()]
        if not axes or any(not -rank <= a < rank for a in axes):
            raise VerifyException(f"{form} (rank {rank}), got {attr}")
        normal = tuple(sorted(a % rank for a in axes))
        if len(set(normal)) != len(normal):
            raise VerifyException(f"{form}, got {attr}")
        return normal

    def result_shape(self, shapes):
        (x,) = shapes
        axes = self.reduced(len(x))
        return tuple(1 if d in axes else n for d, n in enumerate(x))


class WinogradOp(LoomComputeOp):
    """What the three ops of a Winograd convolution F(m x m, 3 x 3) share (dialects/winograd.py:
    the matrices): `tile = m` (2 or 4), f32 or f64. `loom-winograd` rewrites an NHWC 3x3
    stride-1 conv2d into them and a batched matmul of alpha^2 = (m + 2)^2 products:

    ```mlir
    %u = loom.winograd_filter %w {tile = 2} : tensor<3x3x64x64xf32> -> tensor<16x64x64xf32>
    %v = loom.winograd_input %x {tile = 2, padding = array<i64: 1, 1>} : tensor<1x8x8x64xf32> -> tensor<16x16x64xf32>
    %m = loom.matmul %v, %u : (tensor<16x16x64xf32>, tensor<16x64x64xf32>) -> tensor<16x16x64xf32>
    %y = loom.winograd_output %m {tile = 2} : tensor<16x16x64xf32> -> tensor<1x8x8x64xf32>
    ```

    The tiles of an image are numbered row by row, image after image: tile (n, i, j) of an
    output of Ho x Wo is p = (n * ceil(Ho/m) + i) * ceil(Wo/m) + j, and product e = a *
    alpha + b is element (a, b) of the alpha x alpha transformed tiles."""

    TYPES: ClassVar[tuple[Attribute, ...]] = (f32, f64)

    tile = opt_prop_def(Attribute)

    def tile_size(self) -> int:
        """m, validated."""
        attr = self.properties.get("tile")
        if not isinstance(attr, IntegerAttr) or isinstance(attr.type, IndexType) or attr.value.data not in TILES:
            raise VerifyException(f"attribute 'tile' must be the output tile's side, one of "
                                  f"{', '.join(map(str, TILES))} (F(m x m, 3 x 3)), got {attr}")
        return attr.value.data

    def verify_(self) -> None:
        self.tile_size()
        super().verify_()

    def _rank4(self, shape: Sequence[int], what: str, layout: str) -> None:
        if len(shape) != 4:
            raise VerifyException(f"{what} must have rank 4 ({layout}), got shape {_fmt_shape(shape)}")


@irdl_op_definition
class WinogradFilterOp(WinogradOp):
    """U[a * alpha + b, c, f] = (G g G^T)[a, b], g the 3 x 3 filter of input channel c and
    output channel f (HWCF filter in, alpha^2 x C x F out)."""

    name = "loom.winograd_filter"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("filter",)

    def result_shape(self, shapes):
        (w,) = shapes
        self._rank4(w, self._describe(0), "HWCF")
        if tuple(w[:2]) != (3, 3):
            raise VerifyException(f"{self._describe(0)} has shape {_fmt_shape(w)}: a {w[0]}x{w[1]} window, "
                                  f"expected 3x3 (F(m x m, 3 x 3))")
        return (points(self.tile_size()) ** 2, w[2], w[3])


@irdl_op_definition
class WinogradInputOp(WinogradOp):
    """V[a * alpha + b, p, c] = (B^T d B)[a, b], d the alpha x alpha input tile of channel c
    that output tile p reads (rows i*m - ph ... i*m - ph + alpha - 1 of the NHWC input, the
    padded border zero; `padding` 0 by default): alpha^2 x P x C out, P the tiles of a
    3x3 stride-1 convolution's output (Ho = H + 2 ph - 2)."""

    name = "loom.winograd_input"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input",)

    padding = opt_prop_def(Attribute)

    def pad(self) -> tuple[int, int]:
        return pair_property(self, "padding", 0, (0, 0))

    def verify_(self) -> None:
        self.pad()
        super().verify_()

    def output_hw(self, x: Sequence[int]) -> tuple[int, int]:
        """The convolution's Ho, Wo for an NHWC input shape."""
        ph, pw = self.pad()
        return x[1] + 2 * ph - 2, x[2] + 2 * pw - 2

    def result_shape(self, shapes):
        (x,) = shapes
        self._rank4(x, self._describe(0), "NHWC")
        ho, wo = self.output_hw(x)
        if ho < 1 or wo < 1:
            raise VerifyException(f"a 3x3 window does not fit the padded input {ho + 2}x{wo + 2}")
        m = self.tile_size()
        return (points(m) ** 2, tile_count(x[0], ho, wo, m), x[3])


@irdl_op_definition
class WinogradOutputOp(WinogradOp):
    """Y[n, i*m + r, j*m + s, f] = (A^T M_p A)[r, s], M_p the alpha x alpha products of tile
    p = (n, i, j) and output channel f (`WinogradOp`'s numbering): alpha^2 x P x F in, the
    NHWF output out (its N, Ho, Wo say how the P tiles lie; the last tile of a row or
    column may overhang it, and its overhang is not stored)."""

    name = "loom.winograd_output"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("products",)

    def result_shape(self, shapes):
        (p,) = shapes
        if len(p) != 3:
            raise VerifyException(f"{self._describe(0)} must have rank 3 (alpha^2 x tiles x F), got shape "
                                  f"{_fmt_shape(p)}")
        out = tuple(self.output_type.get_shape())
        self._rank4(out, "result" if not self.is_bufferized else "outs operand", "NHWF")
        m = self.tile_size()
        n, ho, wo, _ = out
        expected = (points(m) ** 2, tile_count(n, ho, wo, m))
        if tuple(p[:2]) != expected:
            raise VerifyException(f"{self._describe(0)} has shape {_fmt_shape(p)}, expected {expected[0]} products "
                                  f"x {expected[1]} tiles (of {m}x{m}, F({m}x{m}, 3x3)) for an output of {n}x{ho}x{wo}")
        return (n, ho, wo, p[2])


WINOGRAD_OP_TYPES = (WinogradFilterOp, WinogradInputOp, WinogradOutputOp)


class ElementwiseBinaryOp(LoomComputeOp):
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("lhs", "rhs")
    IN_PLACE: ClassVar[bool] = True

    def result_shape(self, shapes):
        a, b = shapes
        out = broadcast_shapes(a, b)
        if out is None:
            raise VerifyException(
                f"{self._describe(1)} shape {_fmt_shape(b)} does not broadcast with lhs shape {_fmt_shape(a)}"
            )
        return out


@irdl_op_definition
class AddOp(ElementwiseBinaryOp):
    """Elementwise sum with numpy broadcasting.

    ```mlir
    %s = loom.add %c, %bias : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<64x16xf32>
    ```
    """

    name = "loom.add"


@irdl_op_definition
class MulOp(ElementwiseBinaryOp):
    """Elementwise product with numpy broadcasting.

    ```mlir
    %p = loom.mul %c, %d : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
    ```
    """

    name = "loom.mul"


@irdl_op_definition
class ReluOp(LoomComputeOp):
    """max(x, 0) elementwise.

    ```mlir
    %r = loom.relu %s : tensor<64x16xf32>
    ```
    """

    name = "loom.relu"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input",)
    IN_PLACE: ClassVar[bool] = True

    def result_shape(self, shapes):
        return shapes[0]


@irdl_op_definition
class ClampOp(LoomComputeOp):
    """min(max(x, min), max) elementwise, a NaN staying a NaN: torch's hardtanh and clamp
    (ReLU6 is `min = 0, max = 6`), numpy's clip. Floats (f32, f64); the bounds are f64
    attributes, finite, `min <= max`.

    ```mlir
    %r = loom.clamp %s {min = 0.0 : f64, max = 6.0 : f64} : tensor<64x16xf32>
    ```
    """

    name = "loom.clamp"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input",)
    TYPES: ClassVar[tuple[Attribute, ...]] = (f32, f64)
    IN_PLACE: ClassVar[bool] = True

    min = opt_prop_def(Attribute)
    max = opt_prop_def(Attribute)

    def bounds(self) -> tuple[float, float]:
        """(min, max); raises VerifyException naming a missing or bad bound."""
        values = []
        for name in ("min", "max"):
            attr = self.properties.get(name)
            if not isinstance(attr, FloatAttr) or attr.type != f64 or not math.isfinite(attr.value.data):
                raise VerifyException(f"attribute '{name}' is required: a finite float, as in {{{name} = 6.0 : f64}}, "
                                      f"got {attr if attr is not None else 'none'}")
            values.append(attr.value.data)
        if values[0] > values[1]:
            raise VerifyException(f"attribute 'min' ({values[0]}) is larger than 'max' ({values[1]})")
        return values[0], values[1]

    def verify_(self) -> None:
        super().verify_()
        self.bounds()

    def result_shape(self, shapes):
        return shapes[0]


@irdl_op_definition
class CastOp(LoomComputeOp):
    """An element type conversion: f32 -> bf16 (round to nearest even; a NaN stays a
    NaN), bf16 -> f32 (exact), i32 -> f32 (round to nearest even).

    ```mlir
    %h = loom.cast %y : tensor<64x16xf32> -> tensor<64x16xbf16>
    ```
    """

    name = "loom.cast"
    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input",)

    def check_element_types(self, ins: list[Attribute], out: Attribute, which: str) -> None:
        if out not in CASTS.get(ins[0], ()):
            pairs = ", ".join(f"{a} -> {b}" for a, bs in CASTS.items() for b in bs)
            raise VerifyException(f"cannot cast {ins[0]} to {out}: loom.cast converts {pairs}")

    def result_shape(self, shapes):
        return shapes[0]


class AffineQuantizationOp(LoomComputeOp):
    """loom.quantize and loom.dequantize: a scale and a zero point per tensor (0-d
    operands) or per channel along `axis` (operands of the input's extent there)."""

    OPERAND_NAMES: ClassVar[tuple[str, ...]] = ("input", "scale", "zero_point")

    axis = opt_prop_def(Attribute)

    def quantization_axis(self, rank: int) -> int | None:
        """The channel axis, or None (per tensor)."""
        attr = self.properties.get("axis")
        if attr is None:
            return None
        if not isinstance(attr, IntegerAttr) or not 0 <= attr.value.data < rank:
            raise VerifyException(f"attribute 'axis' must be an integer from 0 to {rank - 1} (the input has rank "
                                  f"{rank}), got {attr}")
        return attr.value.data

    def result_shape(self, shapes):
        x = shapes[0]
        axis = self.quantization_axis(len(x))
        want = () if axis is None else (x[axis],)
        why = "per tensor: a 0-d tensor" if axis is None else f"per channel: the input's extent along axis {axis}"
        for i in (1, 2):
            if shapes[i] != want:
                raise VerifyException(f"{self._describe(i)} has shape {_fmt_shape(shapes[i])}, expected "
                                      f"{_fmt_shape(want)} ({why})")
        return x

    def _check_parameters(self, ins: list[Attribute]) -> None:
        for i, want in ((1, f32), (2, i32)):
            if ins[i] != want:
                raise VerifyException(f"{self._describe(i)} has element type {ins[i]}, expected {want}")


@irdl_op_definition
class QuantizeOp(AffineQuantizationOp):
    """q = clamp(round_half_even(x / scale) + zero_point, least, greatest) of the i8
    (-128, 127) or ui8 (0, 255) result: the division in f32, the clamp saturating
    (a NaN gives the least value).

    ```mlir
    %q = loom.quantize %y, %s, %z : (tensor<64x16xf32>, tensor<f32>, tensor<i32>) -> tensor<64x16xui8>
    %q = loom.quantize %y, %s, %z {axis = 1 : i64} : (tensor<64x16xf32>, tensor<16xf32>, tensor<16xi32>) -> tensor<64x16xi8>
    ```
    """

    name = "loom.quantize"

    def check_element_types(self, ins: list[Attribute], out: Attribute, which: str) -> None:
        if ins[0] != f32:
            raise VerifyException(f"{self._describe(0)} has element type {ins[0]}, expected f32")
        self._check_parameters(ins)
        if out not in QUANTIZED:
            raise VerifyException(f"{which} has element type {out}, expected {type_names(QUANTIZED, 'or')}")


@irdl_op_definition
class DequantizeOp(AffineQuantizationOp):
    """x = f32(q - zero_point) * scale, the subtraction in i32 and the product in f32, of
    an i8, ui8 or i32 (an accumulator's) input.

    ```mlir
    %y = loom.dequantize %acc, %s, %z {axis = 1 : i64} : (tensor<64x16xi32>, tensor<16xf32>, tensor<16xi32>) -> tensor<64x16xf32>
    ```
    """

    name = "loom.dequantize"

    def check_element_types(self, ins: list[Attribute], out: Attribute, which: str) -> None:
        if ins[0] not in (*QUANTIZED, i32):
            raise VerifyException(f"{self._describe(0)} has element type {ins[0]}, expected "
                                  f"{type_names((*QUANTIZED, i32), 'or')}")
        self._check_parameters(ins)
        if out != f32:
            raise VerifyException(f"{which} has element type {out}, expected f32")


# --------------------------------------------------------------------------------------
# View ops: one tensor in, a tensor that is a view of its elements out. On tensors they
# are values like any other; loom-bufferize makes each a memref view of its operand's
# buffer (a strided layout: an offset and a stride per dimension, 0 for a broadcast),
# with no copy. `loom.contiguous` is the one that copies.
# --------------------------------------------------------------------------------------


def _i64_array(op: IRDLOperation, name: str, rank: int, what: str) -> tuple[int, ...]:
    """The values of property `name`, which must be `array<i64: ...>` of `rank` values
    (`what` says what they are, for the message)."""
    attr = op.properties.get(name)
    form = f"attribute '{name}' must be array<i64: ...> with {rank} value{'s' * (rank != 1)} ({what})"
    if attr is None:
        raise VerifyException(f"{form}, and it is missing")
    if not isinstance(attr, DenseArrayBase) or attr.elt_type != i64:
        raise VerifyException(f"{form}, got {attr}")
    values = tuple(int(v) for v in attr.get_values())
    if len(values) != rank:
        raise VerifyException(f"{form}: the input has rank {rank}, got {len(values)} value{'s' * (len(values) != 1)} "
                              f"{list(values)}")
    return values


class LoomViewOp(IRDLOperation):
    """Common structure of the view ops: `%r = loom.<op> %x {attributes} : tensor<...> ->
    tensor<...>`, one tensor operand, one tensor result of the same element type.

    On tensors a view is a value like any other. loom-bufferize makes it a memref view of
    its operand's buffer (`memref.reinterpret_cast` to a strided layout: xDSL 0.74 has no
    memref.transpose, and a reinterpret_cast expresses every view here, a broadcast's
    zero strides and a slice's negative ones included), with no copy: `view_layout` gives
    the strides. View ops take tensors only (what bufferization makes of them are memref
    ops)."""

    input = operand_def()
    result = result_def()

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, source: SSAValue, result_type: Attribute, properties: dict[str, Attribute] | None = None):
        super().__init__(operands=[source], result_types=[result_type], properties=properties or {})

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.input.type.get_shape())  # type: ignore[attr-defined]

    @property
    def result_shape(self) -> tuple[int, ...]:
        return tuple(self.result.type.get_shape())  # type: ignore[attr-defined]

    def verify_(self) -> None:
        for what, t in (("operand #0 (input)", self.input.type), ("result", self.result.type)):
            if not isinstance(t, TensorType):
                raise VerifyException(f"{what} must be a tensor, got {t} ({self.name} takes tensors; loom-bufferize "
                                      "makes it a view of the operand's buffer)")
            check_element_type(what, t.get_element_type())
            if any(d < 0 for d in t.get_shape()):
                raise VerifyException(f"{what} must have a static shape, got {t}")
        elt, out_elt = self.input.type.get_element_type(), self.result.type.get_element_type()  # type: ignore[attr-defined]
        if elt != out_elt:
            raise VerifyException(f"result has element type {out_elt}, expected {elt} (the input's): view ops keep "
                                  "the element type")
        self.check_shapes(self.input_shape, self.result_shape)

    def check_shapes(self, source: tuple[int, ...], result: tuple[int, ...]) -> None:
        """Raise VerifyException if `result` is not a shape the op can give `source`
        (with its attributes, checked too)."""
        raise NotImplementedError

    def _expect(self, expected: tuple[int, ...], actual: tuple[int, ...], why: str) -> None:
        if expected != actual:
            raise VerifyException(f"result has shape {_fmt_shape(actual)}, expected {_fmt_shape(expected)} ({why})")

    def view_layout(self, strides: Sequence[int], offset: int) -> tuple[tuple[int, ...], int] | None:
        """The (strides, offset) of the result for an operand buffer laid out with
        `strides` and `offset` (in elements, from the same base), or None when no layout
        can give the result without a copy (a reshape of some non-contiguous views)."""
        raise NotImplementedError


@irdl_op_definition
class TransposeOp(LoomViewOp):
    """The dimensions permuted: result dimension i is input dimension perm[i] (numpy's
    `np.transpose(x, perm)`), any rank.

    ```mlir
    %t = loom.transpose %a {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
    """

    name = "loom.transpose"
    perm_attr = opt_prop_def(Attribute, prop_name="perm")  # checked in `perm`, to name the form

    @property
    def perm(self) -> tuple[int, ...]:
        rank = len(self.input_shape)
        perm = _i64_array(self, "perm", rank, "a permutation of the input's dimensions")
        if sorted(perm) != list(range(rank)):
            raise VerifyException(f"attribute 'perm' must be a permutation of 0..{rank - 1} (each dimension of the "
                                  f"input once), got {list(perm)}")
        return perm

    def check_shapes(self, source, result):
        self._expect(tuple(source[p] for p in self.perm), result, f"the input shape {_fmt_shape(source)} permuted "
                     f"by {list(self.perm)}")

    def view_layout(self, strides, offset):
        return tuple(strides[p] for p in self.perm), offset


@irdl_op_definition
class SliceOp(LoomViewOp):
    """numpy's basic slicing, one (offset, size, stride) per dimension: result element
    (i0, i1, ...) is input element (offsets[0] + i0 * strides[0], ...). A stride may be
    negative (`x[::-1]` is offset n-1, stride -1); every element read must lie inside
    the input.

    ```mlir
    %s = loom.slice %a {offsets = array<i64: 0, 1>, sizes = array<i64: 2, 3>, strides = array<i64: 2, 1>} : tensor<4x8xf32> -> tensor<2x3xf32>
    ```
    """

    name = "loom.slice"
    offsets_attr = opt_prop_def(Attribute, prop_name="offsets")
    sizes_attr = opt_prop_def(Attribute, prop_name="sizes")
    strides_attr = opt_prop_def(Attribute, prop_name="strides")

    def params(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """(offsets, sizes, strides), validated against the input shape."""
        rank = len(self.input_shape)
        offsets = _i64_array(self, "offsets", rank, "the first element read, per dimension")
        sizes = _i64_array(self, "sizes", rank, "the result's shape")
        strides = _i64_array(self, "strides", rank, "the step between elements read, per dimension")
        for d, (n, o, s, st) in enumerate(zip(self.input_shape, offsets, sizes, strides)):
            if s < 0:
                raise VerifyException(f"attribute 'sizes' must be >= 0, got {s} in dimension {d}")
            if st == 0:
                raise VerifyException(f"attribute 'strides' must be nonzero, got 0 in dimension {d} (a stride of 0 "
                                      "repeats an element: that is loom.broadcast_to)")
            if s == 0:
                if not 0 <= o <= n:
                    raise VerifyException(f"dimension {d}: offset {o} is outside the input's dimension of {n} "
                                          "(an empty slice starts at 0 to n)")
                continue
            last = o + (s - 1) * st
            for which, at in (("first", o), ("last", last)):
                if not 0 <= at < n:
                    raise VerifyException(f"dimension {d}: the slice reads elements {o} to {last} (offset {o}, "
                                          f"size {s}, stride {st}), but the input's dimension {d} has {n}: its "
                                          f"{which} element {at} is out of bounds")
        return offsets, sizes, strides

    def check_shapes(self, source, result):
        _, sizes, _ = self.params()
        self._expect(sizes, result, "attribute 'sizes'")

    def view_layout(self, strides, offset):
        offsets, sizes, steps = self.params()
        if 0 in sizes:
            return tuple(s * st for s, st in zip(strides, steps)), offset
        return (tuple(s * st for s, st in zip(strides, steps)),
                offset + sum(o * s for o, s in zip(offsets, strides)))


@irdl_op_definition
class BroadcastToOp(LoomViewOp):
    """numpy's `np.broadcast_to`: leading dimensions added, size-1 dimensions stretched
    to the result's; the stretched ones read one element (stride 0).

    ```mlir
    %b = loom.broadcast_to %a : tensor<8xf32> -> tensor<4x8xf32>
    ```
    """

    name = "loom.broadcast_to"

    def check_shapes(self, source, result):
        if len(result) < len(source):
            raise VerifyException(f"result has rank {len(result)}, less than the input's {len(source)} "
                                  f"(shape {_fmt_shape(source)}): broadcasting only adds leading dimensions")
        lead = len(result) - len(source)
        for d, n in enumerate(source):
            if n not in (1, result[lead + d]):
                raise VerifyException(
                    f"cannot broadcast input shape {_fmt_shape(source)} to {_fmt_shape(result)}: input dimension {d} "
                    f"has size {n}, expected 1 (stretched) or {result[lead + d]} (result dimension {lead + d})")

    def view_layout(self, strides, offset):
        lead = len(self.result_shape) - len(self.input_shape)
        kept = tuple(0 if n == 1 and m != 1 else s
                     for n, m, s in zip(self.input_shape, self.result_shape[lead:], strides))
        return (0,) * lead + kept, offset


@irdl_op_definition
class ReshapeOp(LoomViewOp):
    """The elements in row-major order, in another shape with as many (numpy's
    `np.reshape`). A view when the operand's layout allows it (always for a contiguous
    operand; for a strided view, when the dimensions merged are contiguous with each
    other, numpy's rule); otherwise loom-bufferize copies the operand into a row-major
    buffer first, and says so in a remark.

    ```mlir
    %r = loom.reshape %a : tensor<4x8xf32> -> tensor<2x16xf32>
    ```
    """

    name = "loom.reshape"

    def check_shapes(self, source, result):
        if math.prod(source) != math.prod(result):
            raise VerifyException(f"result shape {_fmt_shape(result)} has {math.prod(result)} elements, the input "
                                  f"(shape {_fmt_shape(source)}) has {math.prod(source)}: a reshape keeps the element "
                                  "count")

    def view_layout(self, strides, offset):
        found = reshape_strides(self.input_shape, strides, self.result_shape)
        return None if found is None else (found, offset)


@irdl_op_definition
class ContiguousOp(LoomViewOp):
    """A row-major copy of its operand (numpy's `np.ascontiguousarray`): the one view op
    that copies, into a fresh buffer, for code that wants unit strides. loom-bufferize
    copies only an operand that is not already row-major (a copy of a buffer with the
    identity layout is that buffer: tensors are values); a returned result is copied
    straight into its out-parameter.

    ```mlir
    %c = loom.contiguous %a : tensor<8x4xf32> -> tensor<8x4xf32>
    ```
    """

    name = "loom.contiguous"

    def check_shapes(self, source, result):
        self._expect(source, result, "the input's: a contiguous copy keeps the shape")

    def view_layout(self, strides, offset):
        return row_major_strides(self.result_shape), 0


VIEW_OP_TYPES = (TransposeOp, SliceOp, BroadcastToOp, ReshapeOp, ContiguousOp)

#: the argument attribute giving the layout a tensor argument is passed with
BUFFER_LAYOUT = "loom.buffer_layout"


def argument_layout(fn: func.FuncOp, index: int) -> StridedLayoutAttr | None:
    """The `loom.buffer_layout` of argument `index` of `fn`, if it has one."""
    if fn.arg_attrs is None or index >= len(fn.arg_attrs.data):
        return None
    attr = fn.arg_attrs.data[index].data.get(BUFFER_LAYOUT)
    return attr  # type: ignore[return-value]  (checked by argument_buffer_type)


def argument_buffer_type(fn: func.FuncOp, index: int) -> Attribute:
    """The memref type tensor argument `index` of `fn` is passed as: its shape, with the
    layout `{loom.buffer_layout = strided<[s0, s1, ...]>}` gives (MLIR's
    `bufferization.buffer_layout`): the caller's array has those element strides (0 for
    a broadcast dimension) from the pointer it passes, the array's first element. With
    negative strides that pointer is not the lowest address the array reaches: the
    memref's base is that lowest address, its offset the distance to the first element
    (kernels move the pointer back by it). Without the attribute: row-major. Raises
    VerifyException for an attribute that is not a static strided layout of the
    argument's rank with offset 0, or on an argument that is not a tensor."""
    t = fn.function_type.inputs.data[index]
    attr = argument_layout(fn, index)
    if attr is None:
        return MemRefType(t.get_element_type(), t.get_shape()) if isinstance(t, TensorType) else t
    where = f"argument #{index}"
    if not isinstance(t, TensorType):
        raise VerifyException(f"{where} has attribute '{BUFFER_LAYOUT}' but is a {t}: only a tensor argument "
                              "takes a buffer layout (a memref's layout is in its type)")
    rank = t.get_num_dims()
    form = (f"'{BUFFER_LAYOUT}' of {where} must be strided<[...]> with {rank} static stride{'s' * (rank != 1)} "
            f"(one per dimension of {t}) and no offset: the element strides of the array passed")
    if not isinstance(attr, StridedLayoutAttr):
        raise VerifyException(f"{form}; got {attr}")
    strides = attr.get_strides()
    if len(strides) != rank or any(s is None for s in strides) or attr.get_offset() != 0:
        raise VerifyException(f"{form}; got {attr}")
    shape = t.get_shape()
    below = -sum((n - 1) * s for n, s in zip(shape, strides) if s < 0 and n > 0)  # type: ignore[operator]
    return strided_memref(t.get_element_type(), shape, strides, 0 if 0 in shape else below)  # type: ignore[arg-type]


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """A hint that an element of a memref will be read or written soon: MLIR's
    `memref.prefetch`, lowered to `llvm.prefetch`. It changes no value; the address may
    lie outside the memref (a prefetch never faults), so a loop can ask for the element
    its next iteration loads without a bounds check.

    ```mlir
    loom.prefetch %c[%i, %j], write, locality<3>, data : memref<64x64xf32>
    ```

    `locality` is LLVM's: 0 (no temporal locality) to 3 (keep in every cache level).
    """

    name = "loom.prefetch"

    memref = operand_def(MemRefType)
    indices = var_operand_def(IndexType())
    is_write = prop_def(BoolAttr)
    locality = prop_def(IntegerAttr)

    # No memory-effect trait, as MLIR's memref.prefetch: unknown effects, so that it is
    # never dead code (an op that only reads and has no results would be).

    def __init__(self, mem: SSAValue, indices: Sequence[SSAValue], *, write: bool, locality: int = 3):
        super().__init__(operands=[mem, indices], properties={
            "is_write": BoolAttr.from_bool(write), "locality": IntegerAttr(locality, i32)})

    def verify_(self) -> None:
        assert isinstance(self.memref.type, MemRefType)
        if len(self.indices) != self.memref.type.get_num_dims():
            raise VerifyException(
                f"needs {self.memref.type.get_num_dims()} indices for "
                f"{self.memref.type}, got {len(self.indices)}")
        if not 0 <= self.locality.value.data <= 3:
            raise VerifyException(f"locality is 0 to 3, got {self.locality.value.data}")

    @classmethod
    def parse(cls, parser: Parser) -> PrefetchOp:
        mem = parser.parse_unresolved_operand()
        indices = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_unresolved_operand)
        parser.parse_punctuation(",")
        pos = parser.pos
        kind = parser.parse_identifier()
        if kind not in ("read", "write"):
            parser.raise_error(f"expected 'read' or 'write', got '{kind}'", pos, parser.pos)
        parser.parse_punctuation(",")
        parser.parse_keyword("locality")
        parser.parse_punctuation("<")
        pos = parser.pos
        locality = parser.parse_integer()
        if not 0 <= locality <= 3:
            parser.raise_error(f"locality is 0 to 3, got {locality}", pos, parser.pos)
        parser.parse_punctuation(">")
        parser.parse_punctuation(",")
        pos = parser.pos
        if parser.parse_identifier() != "data":
            parser.raise_error("only data prefetches ('data') are supported", pos, parser.pos)
        parser.parse_punctuation(":")
        t = parser.parse_type()
        return cls(parser.resolve_operand(mem, t),
                   [parser.resolve_operand(i, IndexType()) for i in indices],
                   write=kind == "write", locality=locality)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.memref)
        printer.print_string("[")
        printer.print_list(self.indices, printer.print_operand)
        kind = "write" if self.is_write.value.data else "read"
        printer.print_string(f"], {kind}, locality<{self.locality.value.data}>, data : ")
        printer.print_attribute(self.memref.type)


@irdl_op_definition
class TicksOp(IRDLOperation):
    """The CPU's cycle counter (x86's time-stamp counter, a constant rate): LLVM's
    `llvm.readcyclecounter`. What `loom-profile` times each loop nest with.

    ```mlir
    %t = loom.ticks : i64
    ```

    No memory-effect trait: each read is a moment of its own, never merged with another
    (cse) nor moved across the ops around it.
    """

    name = "loom.ticks"

    result = result_def(i64)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[i64])


Loom = Dialect("loom", [MatmulOp, Conv2DOp, MaxPool2DOp, AvgPool2DOp, MeanOp, AddOp, MulOp, ReluOp, ClampOp, CastOp, QuantizeOp, DequantizeOp, *WINOGRAD_OP_TYPES,
                       *VIEW_OP_TYPES,
                       PrefetchOp, TicksOp], [])
