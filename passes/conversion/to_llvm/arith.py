"""arith, math and cf → llvm: constants, integer and float arithmetic (fastmath and
nsw/nuw flags kept), comparisons, casts, math intrinsics and libm calls, branches."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, cf, llvm, math, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    VectorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from dialects import arith_ext
from dialects.llvm_ext import FPToSIOp, FPToUIOp, UIToFPOp
from passes.conversion.to_llvm.abi import mangle
from passes.conversion.to_llvm.common import Externals, Lowering, Rewrite, fastmath


def _overflow(op: Operation) -> llvm.OverflowAttr:
    flags = getattr(op, "overflow_flags", None)
    mapping = {"nsw": llvm.OverflowFlag.NO_SIGNED_WRAP, "nuw": llvm.OverflowFlag.NO_UNSIGNED_WRAP}
    if isinstance(flags, arith.IntegerOverflowAttr) and flags.data:
        return llvm.OverflowAttr(tuple(mapping[f.value] for f in flags.data))
    return llvm.OverflowAttr("none")


def _call_intrinsic(r: Rewrite, name: str, args: Sequence[SSAValue], result: Attribute, fm: llvm.FastMathAttr) -> SSAValue:
    """`llvm.call_intrinsic "<name>"(args)`; `name` is already mangled (llvm.maximum.f32)."""
    call = llvm.CallIntrinsicOp(name, args, [result])
    call.properties["fastmathFlags"] = fm
    return r.result(call)


def _splat(value: float, t: Attribute) -> Attribute:
    if isinstance(t, VectorType):
        return DenseIntOrFPElementsAttr.from_list(t, [value] * t.element_count())
    return FloatAttr(value, t)


class ConstantLowering(Lowering):
    sources = (arith.ConstantOp,)

    def lower(self, op: arith.ConstantOp, r: Rewrite) -> None:
        t = r.type(op.result.type)
        value = op.value
        if _is_bf16(op.result.type):  # its bits, rounded as _f32_to_bf16 rounds
            if isinstance(value, FloatAttr):
                value = IntegerAttr(bf16_bits(value.value.data), t)
            elif isinstance(value, DenseIntOrFPElementsAttr):
                value = DenseIntOrFPElementsAttr.from_list(t, [bf16_bits(v) for v in value.get_values()])
        if isinstance(value, IntegerAttr):
            value = IntegerAttr(value.value.data, t)
        elif isinstance(value, DenseIntOrFPElementsAttr):
            if value.get_type() != t:
                value = DenseIntOrFPElementsAttr.from_list(t, value.get_values())
        elif not isinstance(value, FloatAttr):
            raise r.refuse(f"constant {value} is not an integer, float or dense vector")
        r.replace(r.result(llvm.ConstantOp(value, t)))


_INT_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
}


class IntBinaryLowering(Lowering):
    """addi … shrui → the llvm op of the same name (nsw/nuw flags kept)."""

    sources = tuple(_INT_BINARY)

    def lower(self, op: Operation, r: Rewrite) -> None:
        target = _INT_BINARY[type(op)]
        lhs, rhs = r.values(op.operands)
        if issubclass(target, llvm.ArithmeticBinOpOverflow):
            new = target(lhs, rhs, overflow=_overflow(op))
        else:
            new = target(lhs, rhs)
        r.replace(r.result(new))


_INT_MINMAX = {arith.MinSIOp: "slt", arith.MaxSIOp: "sgt", arith.MinUIOp: "ult", arith.MaxUIOp: "ugt"}


class IntMinMaxLowering(Lowering):
    """minsi/maxsi/minui/maxui → icmp + select (vectors: llvm.smin/smax/umin/umax)."""

    sources = tuple(_INT_MINMAX)

    def lower(self, op: Operation, r: Rewrite) -> None:
        lhs, rhs = r.values(op.operands)
        if isinstance(lhs.type, VectorType):
            name = {"slt": "smin", "sgt": "smax", "ult": "umin", "ugt": "umax"}[_INT_MINMAX[type(op)]]
            r.replace(_call_intrinsic(r, f"llvm.{name}.{mangle(lhs.type)}", [lhs, rhs], lhs.type, llvm.FastMathAttr(None)))
            return
        pred = llvm.ICmpPredicateFlag(_INT_MINMAX[type(op)])
        cmp = r.result(llvm.ICmpOp(lhs, rhs, IntegerAttr(pred.to_int(), i64)))
        r.replace(r.result(llvm.SelectOp(cmp, lhs, rhs)))


class RoundingDivLowering(Lowering):
    """floordivsi/ceildivsi/ceildivui → div, rem, and a ±1 correction where rem ≠ 0."""

    sources = (arith.FloorDivSIOp, arith.CeilDivSIOp, arith.CeilDivUIOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        a, b = r.values(op.operands)
        t = a.type
        if isinstance(t, VectorType):
            raise r.refuse("vector operands are not supported yet")

        def icmp(pred: str, x: SSAValue, y: SSAValue) -> SSAValue:
            return r.result(llvm.ICmpOp(x, y, IntegerAttr(llvm.ICmpPredicateFlag(pred).to_int(), i64)))

        zero, one = r.const(0, t), r.const(1, t)
        if isinstance(op, arith.CeilDivUIOp):
            q, rem = r.result(llvm.UDivOp(a, b)), r.result(llvm.URemOp(a, b))
            r.replace(r.result(llvm.SelectOp(icmp("ne", rem, zero), r.result(llvm.AddOp(q, one)), q)))
            return
        q, rem = r.result(llvm.SDivOp(a, b)), r.result(llvm.SRemOp(a, b))
        inexact = icmp("ne", rem, zero)
        # floor: the exact quotient was negative (signs differ); ceil: it was positive.
        signs_differ = r.result(llvm.XOrOp(icmp("slt", rem, zero), icmp("slt", b, zero)))
        if isinstance(op, arith.FloorDivSIOp):
            adjust, fixed = signs_differ, r.result(llvm.SubOp(q, one))
        else:
            adjust, fixed = r.result(llvm.XOrOp(signs_differ, r.const(-1, i1))), r.result(llvm.AddOp(q, one))
        r.replace(r.result(llvm.SelectOp(r.result(llvm.AndOp(inexact, adjust)), fixed, q)))


_FLOAT_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
    arith.MaxnumfOp: llvm.VectorFMaxOp,
    arith.MinnumfOp: llvm.VectorFMinOp,
    math.PowFOp: llvm.FPowOp,
    math.CopySignOp: llvm.FCopySignOp,
}

_FLOAT_UNARY: dict[type[Operation], type[Operation]] = {
    arith.NegfOp: llvm.FNegOp,
    math.AbsFOp: llvm.FAbsOp,
    math.CeilOp: llvm.FCeilOp,
    math.FloorOp: llvm.FFloorOp,
    math.SqrtOp: llvm.FSqrtOp,
    math.ExpOp: llvm.FExpOp,
    math.Exp2Op: llvm.FExp2Op,
    math.LogOp: llvm.FLogOp,
    math.Log2Op: llvm.FLog2Op,
    math.SinOp: llvm.FSinOp,
    math.CosOp: llvm.FCosOp,
}


class FloatOpLowering(Lowering):
    """Elementwise float ops that have an llvm op of their own (fadd, fneg, llvm.intr.sqrt,
    …), fastmath flags carried over."""

    sources = (*_FLOAT_BINARY, *_FLOAT_UNARY, math.FmaOp, vector.FMAOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        target = _FLOAT_BINARY.get(type(op)) or _FLOAT_UNARY.get(type(op)) or llvm.FMAOp
        args = r.values(op.operands)
        new = target.create(
            operands=args,
            result_types=[args[0].type],
            properties={"fastmathFlags": fastmath(op)},
        )
        r.replace(r.result(new))


# Float ops lowered to an llvm.call_intrinsic of an overloaded intrinsic (name.<type>).
_FLOAT_INTRINSICS: dict[type[Operation], str] = {
    arith.MaximumfOp: "llvm.maximum",
    arith.MinimumfOp: "llvm.minimum",
    math.Log10Op: "llvm.log10",
    math.RoundOp: "llvm.round",
    math.RoundEvenOp: "llvm.roundeven",
    math.TruncOp: "llvm.trunc",
    math.TanOp: "llvm.tan",
    math.TanhOp: "llvm.tanh",
    math.SinhOp: "llvm.sinh",
    math.CoshOp: "llvm.cosh",
    math.AsinOp: "llvm.asin",
    math.AcosOp: "llvm.acos",
    math.AtanOp: "llvm.atan",
    math.Atan2Op: "llvm.atan2",
}


class FloatIntrinsicLowering(Lowering):
    sources = tuple(_FLOAT_INTRINSICS)

    def lower(self, op: Operation, r: Rewrite) -> None:
        args = r.values(op.operands)
        name = f"{_FLOAT_INTRINSICS[type(op)]}.{mangle(args[0].type)}"
        r.replace(_call_intrinsic(r, name, args, args[0].type, fastmath(op)))


# Float ops with no LLVM intrinsic: calls to libm (scalars only).
_LIBM: dict[type[Operation], str] = {
    math.ErfOp: "erf",
    math.CbrtOp: "cbrt",
    math.ExpM1Op: "expm1",
    math.Log1pOp: "log1p",
    math.AsinhOp: "asinh",
    math.AcoshOp: "acosh",
    math.AtanhOp: "atanh",
}


@dataclass
class LibmLowering(Lowering):
    externals: Externals
    sources = tuple(_LIBM)

    def lower(self, op: Operation, r: Rewrite) -> None:
        args = r.values(op.operands)
        t = args[0].type
        if not isinstance(t, (Float32Type, Float64Type)):
            raise r.refuse(f"libm has no function for {t}")
        name = _LIBM[type(op)] + ("f" if isinstance(t, Float32Type) else "")
        self.externals.use(name, [t] * len(args), t)
        r.replace(r.result(llvm.CallOp(name, *args, return_type=t)))


class MathMiscLowering(Lowering):
    """rsqrt (1/sqrt), absi/ctlz/cttz/ctpop (integer intrinsics), fpowi (llvm.powi)."""

    sources = (math.RsqrtOp, math.AbsIOp, math.CountLeadingZerosOp, math.CountTrailingZerosOp, math.CtPopOp, math.FPowIOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        args = r.values(op.operands)
        t = args[0].type
        match op:
            case math.RsqrtOp():
                fm = fastmath(op)
                sqrt = r.result(llvm.FSqrtOp.create(operands=args, result_types=[t], properties={"fastmathFlags": fm}))
                one = r.result(llvm.ConstantOp(_splat(1.0, t), t))
                r.replace(r.result(llvm.FDivOp(one, sqrt, fm)))
            case math.FPowIOp():
                name = f"llvm.powi.{mangle(t)}.{mangle(args[1].type)}"
                r.replace(_call_intrinsic(r, name, args, t, fastmath(op)))
            case math.CtPopOp():
                r.replace(_call_intrinsic(r, f"llvm.ctpop.{mangle(t)}", args, t, llvm.FastMathAttr(None)))
            case _:
                base = {math.AbsIOp: "llvm.abs", math.CountLeadingZerosOp: "llvm.ctlz", math.CountTrailingZerosOp: "llvm.cttz"}[type(op)]
                poison = r.const(0, i1)  # i1 false: defined result for INT_MIN / zero input
                r.replace(_call_intrinsic(r, f"{base}.{mangle(t)}", [*args, poison], t, llvm.FastMathAttr(None)))


class CmpiLowering(Lowering):
    sources = (arith.CmpiOp,)

    def lower(self, op: arith.CmpiOp, r: Rewrite) -> None:
        lhs, rhs = r.values(op.operands)
        pred = llvm.ICmpPredicateFlag(arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data])
        r.replace(r.result(llvm.ICmpOp(lhs, rhs, IntegerAttr(pred.to_int(), i64))))


class CmpfLowering(Lowering):
    sources = (arith.CmpfOp,)

    def lower(self, op: arith.CmpfOp, r: Rewrite) -> None:
        lhs, rhs = r.values(op.operands)
        name = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        if isinstance(lhs.type, VectorType):
            raise r.refuse("vector comparisons are not supported yet")
        if name in ("false", "true"):
            r.replace(r.const(-1 if name == "true" else 0, i1))
            return
        cmp = llvm.FCmpOp(lhs, rhs, name)
        cmp.properties["fastmathFlags"] = fastmath(op)
        r.replace(r.result(cmp))


class SelectLowering(Lowering):
    sources = (arith.SelectOp,)

    def lower(self, op: arith.SelectOp, r: Rewrite) -> None:
        cond, lhs, rhs = r.values(op.operands)  # a vector<Nxi1> condition selects lane by lane
        r.replace(r.result(llvm.SelectOp(cond, lhs, rhs)))


_CASTS: dict[type[Operation], type[Operation]] = {
    arith.SIToFPOp: llvm.SIToFPOp,
    arith.UIToFPOp: UIToFPOp,
    arith.FPToSIOp: FPToSIOp,
    arith.FPToUIOp: FPToUIOp,
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.ExtSIOp: llvm.SExtOp,
    arith.ExtUIOp: llvm.ZExtOp,
    arith.TruncIOp: llvm.TruncOp,
    arith.BitcastOp: llvm.BitcastOp,
    arith_ext.ExtSIOp: llvm.SExtOp,
    arith_ext.ExtUIOp: llvm.ZExtOp,
    arith_ext.TruncIOp: llvm.TruncOp,
    arith_ext.SIToFPOp: llvm.SIToFPOp,
    arith_ext.FPToSIOp: FPToSIOp,
}


def _width(t: Attribute) -> int:
    t = t.element_type if isinstance(t, VectorType) else t
    assert isinstance(t, IntegerType)
    return t.width.data


def _is_bf16(t: Attribute) -> bool:
    return isinstance(t.element_type if isinstance(t, VectorType) else t, BFloat16Type)


def _like(t: Attribute, element: Attribute) -> Attribute:
    """`element`, or a vector of it shaped like `t`."""
    return VectorType(element, t.get_shape()) if isinstance(t, VectorType) else element


def _splat_int(r: Rewrite, value: int, t: Attribute) -> SSAValue:
    """An integer constant of type `t`, a scalar or a splat vector."""
    return r.result(llvm.ConstantOp(_splat(value, t) if isinstance(t, VectorType) else IntegerAttr(value, t), t))


def _bf16_to_f32(r: Rewrite, bits: SSAValue, to: Attribute) -> SSAValue:
    """bf16 -> f32, exact: its 16 bits are the f32's upper half."""
    wide = _like(to, i32)
    ext = r.result(llvm.ZExtOp(bits, wide))
    shifted = r.result(llvm.ShlOp(ext, _splat_int(r, 16, wide)))
    return r.result(llvm.BitcastOp(shifted, to))


def bf16_bits(value: float) -> int:
    """The 16 bits of `value` as bf16 (through f32, rounded to nearest even; a NaN quiet), as
    a signed i16: the constant form of `_f32_to_bf16`."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if bits & 0x7FFFFFFF > 0x7F800000:
        half = (bits >> 16) | 0x40
    else:
        half = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return half - 0x10000 if half & 0x8000 else half


def _f32_to_bf16(r: Rewrite, x: SSAValue, to: Attribute) -> SSAValue:
    """f32 -> bf16, rounded to nearest even: add 0x7fff plus the lowest kept bit, keep the
    upper half (a carry into the exponent rounds up to the next binade or to infinity,
    as it should); a NaN keeps its upper half with the quiet bit set (the rounding could
    carry its payload into the sign or make it an infinity)."""
    wide = _like(to, i32)
    bits = r.result(llvm.BitcastOp(x, wide))
    upper = r.result(llvm.LShrOp(bits, _splat_int(r, 16, wide)))
    lowest_kept = r.result(llvm.AndOp(upper, _splat_int(r, 1, wide)))
    bias = r.result(llvm.AddOp(lowest_kept, _splat_int(r, 0x7FFF, wide)))
    rounded = r.result(llvm.LShrOp(r.result(llvm.AddOp(bits, bias)), _splat_int(r, 16, wide)))
    quiet = r.result(llvm.OrOp(upper, _splat_int(r, 0x40, wide)))
    magnitude = r.result(llvm.AndOp(bits, _splat_int(r, 0x7FFFFFFF, wide)))
    ugt = llvm.ICmpPredicateFlag("ugt").to_int()  # (xDSL types a vector llvm.fcmp i1: compare the bits)
    nan = r.result(llvm.ICmpOp(magnitude, _splat_int(r, 0x7F800000, wide), IntegerAttr(ugt, i64)))
    # select by a mask of the lanes (xDSL's llvm.select takes an i1 condition only)
    mask = r.result(llvm.SExtOp(nan, wide))
    differ = r.result(llvm.XOrOp(rounded, quiet))
    picked = r.result(llvm.XOrOp(rounded, r.result(llvm.AndOp(differ, mask))))
    return r.result(llvm.TruncOp(picked, to))


class CastLowering(Lowering):
    """sitofp … bitcast → the llvm cast of the same meaning; index_cast → sext/trunc/nothing."""

    sources = (*_CASTS, arith.IndexCastOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        (arg,) = r.values(op.operands)
        to = r.type(op.results[0].type)
        if isinstance(op, arith.ExtFOp) and _is_bf16(op.operands[0].type):
            r.replace(_bf16_to_f32(r, arg, to))
            return
        if isinstance(op, arith.TruncFOp) and _is_bf16(op.results[0].type):
            r.replace(_f32_to_bf16(r, arg, to))
            return
        if isinstance(op, arith.IndexCastOp):
            src, dst = _width(arg.type), _width(to)
            if src == dst:
                r.replace(arg)
                return
            target = llvm.SExtOp if src < dst else llvm.TruncOp
        else:
            target = _CASTS[type(op)]
        r.replace(r.result(target.create(operands=[arg], result_types=[to])))


# --------------------------------------------------------------------------------------
# cf
# --------------------------------------------------------------------------------------


class BranchLowering(Lowering):
    sources = (cf.BranchOp, cf.ConditionalBranchOp)

    def lower(self, op: Operation, r: Rewrite) -> None:
        if isinstance(op, cf.BranchOp):
            new = llvm.BrOp(op.successor, *r.values(op.arguments))
        else:
            assert isinstance(op, cf.ConditionalBranchOp)
            new = llvm.CondBrOp(
                r.value(op.cond),
                op.then_block,
                r.values(op.then_arguments),
                op.else_block,
                r.values(op.else_arguments),
            )
        r.rewriter.replace(op, new, [])
