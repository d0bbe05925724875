"""loom-lower-affine, numerically: the arith it emits computes what the affine ops mean.

Random affine expressions (dims, symbols, +, * by a constant, floordiv/ceildiv/mod by a
positive constant) are lowered from an `affine.apply` and run in xDSL's interpreter on
random integers, negative ones included, against Python's exact integer semantics.
Loop nests (tiled min bounds, iter_args, a padding `affine.if`) and memory accesses parsed
from text (`affine.load %m[%i, %j]`, whose map has the indices as symbols) are run the
same way.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.builder import Builder
from xdsl.dialects import affine, arith, func
from xdsl.dialects.builtin import AffineMapAttr, IndexType, ModuleOp, i32
from xdsl.interpreter import Interpreter, InterpreterFunctions, PythonValues, impl, register_impls
from xdsl.interpreters.arith import ArithFunctions
from xdsl.interpreters.func import FuncFunctions
from xdsl.interpreters.memref import MemRefFunctions
from xdsl.interpreters.scf import ScfFunctions
from xdsl.interpreters.shaped_array import ShapedArray
from xdsl.interpreters.utils.ptr import TypedPtr
from xdsl.ir import Block, Region
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)
from xdsl.rewriter import InsertPoint

from dialects.context import make_context
from passes.support.diagnostics import LoomError
from passes.support.parser import parse_module
from passes.support.verifier import verify
from passes.conversion.loom_lower_affine import LoomLowerAffinePass, expand_affine_expr

N_DIMS, N_SYMS = 2, 2

# What the lowering of an affine expression may emit: plain arith, no floordivsi/ceildivsi
# (divui/remui where the dividend is provably non-negative, e.g. (d0 * 2) floordiv 2 of a
# dimension, which is an index and never negative).
PLAIN_ARITH = {
    "arith.constant", "arith.addi", "arith.subi", "arith.muli", "arith.divsi",
    "arith.remsi", "arith.divui", "arith.remui", "arith.cmpi", "arith.select",
}  # fmt: skip


# --- random affine expressions and their exact value -----------------------------------

K = AffineBinaryOpKind
leaves = st.one_of(
    st.integers(0, N_DIMS - 1).map(AffineDimExpr),
    st.integers(0, N_SYMS - 1).map(AffineSymExpr),
    st.integers(-20, 20).map(AffineConstantExpr),
)


def _extend(children: st.SearchStrategy[AffineExpr]) -> st.SearchStrategy[AffineExpr]:
    const = st.integers(-9, 9).map(AffineConstantExpr)
    divisor = st.integers(1, 9).map(AffineConstantExpr)
    node = AffineBinaryOpExpr  # built directly: no simplification by xDSL's operators
    return st.one_of(
        st.builds(node, st.just(K.Add), children, children),
        st.builds(node, st.just(K.Mul), children, const),
        st.builds(node, st.just(K.Mul), const, children),
        st.builds(node, st.sampled_from([K.FloorDiv, K.CeilDiv, K.Mod]), children, divisor),
    )


exprs = st.recursive(leaves, _extend, max_leaves=12)
values = st.integers(-1000, 1000)


def exact(expr: AffineExpr, dims: list[int], syms: list[int]) -> int:
    match expr:
        case AffineConstantExpr(value=v):
            return v
        case AffineDimExpr(position=p):
            return dims[p]
        case AffineSymExpr(position=p):
            return syms[p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = exact(lhs, dims, syms), exact(rhs, dims, syms)
            match kind:
                case K.Add:
                    return a + b
                case K.Mul:
                    return a * b
                case K.FloorDiv:
                    return a // b
                case K.CeilDiv:
                    return -((-a) // b)
                case K.Mod:
                    return a % b
    raise AssertionError(expr)


# --- building, lowering, running ---------------------------------------------------------


@register_impls
class MinMaxFunctions(InterpreterFunctions):
    """arith.minsi/maxsi and divui/remui, which xDSL 0.74's arith interpreter lacks (the
    unsigned ones on non-negative operands: the only ones lower-affine gives them)."""

    @impl(arith.MinSIOp)
    def run_minsi(self, interpreter: Interpreter, op: arith.MinSIOp, args: PythonValues):
        return (min(args),)

    @impl(arith.MaxSIOp)
    def run_maxsi(self, interpreter: Interpreter, op: arith.MaxSIOp, args: PythonValues):
        return (max(args),)

    @impl(arith.DivUIOp)
    def run_divui(self, interpreter: Interpreter, op: arith.DivUIOp, args: PythonValues):
        assert min(args) >= 0, args
        return (args[0] // args[1],)

    @impl(arith.RemUIOp)
    def run_remui(self, interpreter: Interpreter, op: arith.RemUIOp, args: PythonValues):
        assert min(args) >= 0, args
        return (args[0] % args[1],)


def lower(module: ModuleOp) -> ModuleOp:
    LoomLowerAffinePass().apply(make_context(), module)
    verify(module)
    assert not [op.name for op in module.walk() if op.name.startswith("affine.")]
    return module


def run(module: ModuleOp, name: str, *args):
    interpreter = Interpreter(module, index_bitwidth=64)
    for functions in (ArithFunctions(), FuncFunctions(), ScfFunctions(), MemRefFunctions()):
        interpreter.register_implementations(functions)
    interpreter.register_implementations(MinMaxFunctions())
    return interpreter.call_op(name, args)


def apply_module(expr: AffineExpr) -> ModuleOp:
    """func @f(d0, d1, s0, s1) -> index { return affine.apply (d0, d1)[s0, s1] -> (expr) }"""
    block = Block(arg_types=[IndexType()] * (N_DIMS + N_SYMS))
    apply = affine.ApplyOp(block.args, AffineMapAttr(AffineMap(N_DIMS, N_SYMS, (expr,))))
    block.add_ops([apply, func.ReturnOp(apply.result)])
    f = func.FuncOp("f", ((IndexType(),) * (N_DIMS + N_SYMS), (IndexType(),)), Region(block))
    return ModuleOp([f])


@settings(max_examples=300, deadline=None)
@given(
    expr=exprs,
    dims=st.lists(values, min_size=N_DIMS, max_size=N_DIMS),
    syms=st.lists(values, min_size=N_SYMS, max_size=N_SYMS),
)
def test_affine_apply_matches_exact_semantics(expr: AffineExpr, dims: list[int], syms: list[int]):
    module = lower(apply_module(expr))
    emitted = {op.name for op in module.walk()} - {"builtin.module", "func.func", "func.return"}
    assert emitted <= PLAIN_ARITH, emitted
    (result,) = run(module, "f", *dims, *syms)
    assert result == exact(expr, dims, syms), f"{expr} at dims={dims} syms={syms}"


@pytest.mark.parametrize("a", range(-9, 10))
@pytest.mark.parametrize("kind", [K.FloorDiv, K.CeilDiv, K.Mod])
def test_division_rounding_around_zero(kind: AffineBinaryOpKind, a: int):
    """Every residue on both sides of zero, where divsi/remsi round the other way."""
    expr = AffineBinaryOpExpr(kind, AffineDimExpr(0), AffineConstantExpr(4))
    (result,) = run(lower(apply_module(expr)), "f", a, 0, 0, 0)
    assert result == exact(expr, [a, 0], [0, 0])


def test_constant_expression_folds_to_one_constant():
    seven_minus = AffineBinaryOpExpr(K.Add, AffineConstantExpr(-7), AffineConstantExpr(2))
    expr = AffineBinaryOpExpr(K.FloorDiv, seven_minus, AffineConstantExpr(2))  # (-5) floordiv 2
    module = lower(apply_module(expr))
    ops = [op for op in module.walk() if op.name.startswith("arith.")]
    assert len(ops) == 1 and isinstance(ops[0], arith.ConstantOp) and ops[0].value.value.data == -3


def test_product_of_symbol_and_dim_is_one_muli():
    """Semi-affine d0 * s0 (which xDSL's parser does not accept) is still expanded."""
    expr = AffineBinaryOpExpr(K.Mul, AffineDimExpr(0), AffineSymExpr(1))
    module = lower(apply_module(expr))
    assert [op.name for op in module.walk() if op.name.startswith("arith.")] == ["arith.muli"]
    assert run(module, "f", -6, 0, 0, 7) == (-42,)


def test_division_by_a_symbol_is_refused():
    expr = AffineBinaryOpExpr(K.FloorDiv, AffineDimExpr(0), AffineSymExpr(0))
    message = r"semi-affine '\(d0 floordiv s0\)': floordiv by a non-constant"
    with pytest.raises(LoomError, match=message):
        lower(apply_module(expr))


def test_expand_affine_expr_is_usable_from_another_pass():
    """The helper inserts at a builder's insertion point and returns the value."""
    block = Block(arg_types=[IndexType(), IndexType()])
    ret = func.ReturnOp()
    block.add_op(ret)
    builder = Builder(InsertPoint.before(ret))
    d0, s0 = block.args
    expr = (AffineExpr.dimension(0) + AffineExpr.symbol(0)) % 3
    value = expand_affine_expr(builder, expr, [d0], [s0])
    ret.operands = [value]
    f = func.FuncOp("g", ((IndexType(), IndexType()), (IndexType(),)), Region(block))
    module = ModuleOp([f])
    verify(module)
    assert run(module, "g", -5, 1) == ((-5 + 1) % 3,)


# --- parsed from text: loads, loop nests, if --------------------------------------------


def parse(text: str) -> ModuleOp:
    return parse_module(make_context(), text, "test.mlir")


def memref_i32(rows: int, cols: int) -> ShapedArray[int]:
    """A rows x cols i32 memref whose element [r, c] is r * 100 + c."""
    data = TypedPtr.new_int32([r * 100 + c for r in range(rows) for c in range(cols)])
    return ShapedArray(data, [rows, cols])


def test_load_with_indices_as_symbols():
    """`%m[%i, %j]` parses with the map ()[s0, s1] -> (s0, s1); xDSL's lower-affine crashes."""
    module = parse(
        """
        func.func @f(%m: memref<6x7xi32>, %i: index, %j: index) -> (i32, i32) {
          %a = affine.load %m[%i, %j] : memref<6x7xi32>
          %b = affine.load %m[%i * 2 + %j - 1, %j floordiv 2] : memref<6x7xi32>
          func.return %a, %b : i32, i32
        }
        """
    )
    (load,) = [op for op in module.walk() if isinstance(op, affine.LoadOp)][:1]
    assert load.map.data.num_dims == 0 and load.map.data.num_symbols == 2  # the parser's form
    lower(module)
    m = memref_i32(6, 7)
    for i, j in [(0, 1), (1, 2), (2, 1), (1, 4), (3, 0)]:
        assert run(module, "f", m, i, j) == (i * 100 + j, (i * 2 + j - 1) * 100 + j // 2)


def test_store_through_a_map():
    module = parse(
        """
        func.func @f(%m: memref<6x7xi32>, %i: index, %v: i32) {
          affine.store %v, %m[%i + 1, %i * 3 mod 7] : memref<6x7xi32>
          func.return
        }
        """
    )
    lower(module)
    m = memref_i32(6, 7)
    run(module, "f", m, 3, -1)
    assert m.load((4, 9 % 7)) == -1


def test_tiled_loop_with_min_bound_and_iter_args():
    """A loop tiled by 32 over a symbolic extent visits each i < n exactly once."""
    module = parse(
        """
        func.func @f(%n: index) -> index {
          %c0 = arith.constant 0 : index
          %r = affine.for %i = 0 to %n step 32 iter_args(%acc = %c0) -> (index) {
            %s = affine.for %ii = affine_map<(d0) -> (d0)>(%i) to min affine_map<(d0)[s0] -> (d0 + 32, s0)>(%i)[%n] iter_args(%a = %acc) -> (index) {
              %t = arith.addi %a, %ii : index
              affine.yield %t : index
            }
            affine.yield %s : index
          }
          func.return %r : index
        }
        """
    )
    lower(module)
    for n in (0, 1, 31, 32, 33, 100):
        assert run(module, "f", n) == (sum(range(n)),)


def test_max_lower_bound_and_step():
    module = parse(
        """
        func.func @f(%a: index, %s: index) -> index {
          %c0 = arith.constant 0 : index
          %r = affine.for %i = max affine_map<(d0)[s0] -> (d0 - 3, s0)>(%a)[%s] to 40 step 3 iter_args(%acc = %c0) -> (index) {
            %t = arith.addi %acc, %i : index
            affine.yield %t : index
          }
          func.return %r : index
        }
        """
    )
    lower(module)
    for a, s in [(0, 0), (10, 2), (2, 10), (-5, -7)]:
        assert run(module, "f", a, s) == (sum(range(max(a - 3, s), 40, 3)),)


def test_padding_if_else():
    """Adds 1 for each (i, j) in [-2, 10)^2 inside the set 1 <= i + j <= 8, 100 outside."""
    module = parse(
        """
        func.func @f() -> index {
          %c0 = arith.constant 0 : index
          %r = affine.for %i = -2 to 10 iter_args(%acc = %c0) -> (index) {
            %s = affine.for %j = -2 to 10 iter_args(%a = %acc) -> (index) {
              %inc = "affine.if"(%i, %j) <{condition = affine_set<(d0, d1) : (d0 + d1 - 1 >= 0, -d0 - d1 + 8 >= 0)>}> ({
                %one = arith.constant 1 : index
                "affine.yield"(%one) : (index) -> ()
              }, {
                %hundred = arith.constant 100 : index
                "affine.yield"(%hundred) : (index) -> ()
              }) : (index, index) -> index
              %t = arith.addi %a, %inc : index
              affine.yield %t : index
            }
            affine.yield %s : index
          }
          func.return %r : index
        }
        """
    )
    lower(module)
    expected = sum(1 if 1 <= i + j <= 8 else 100 for i in range(-2, 10) for j in range(-2, 10))
    assert run(module, "f") == (expected,)


def test_affine_min_in_a_loop_body():
    module = parse(
        """
        func.func @f(%i: index, %n: index) -> index {
          %m = affine.min affine_map<(d0)[s0] -> (32, s0 - d0)>(%i)[%n]
          func.return %m : index
        }
        """
    )
    lower(module)
    assert run(module, "f", 96, 100) == (4,)
    assert run(module, "f", 0, 100) == (32,)


def test_refusal_names_the_op_location():
    module = parse(
        """
        func.func @f(%i: index) -> index {
          %0 = affine.apply affine_map<(d0) -> (d0 mod -2)>(%i)
          func.return %0 : index
        }
        """
    )
    message = r"^test\.mlir:3:11: error: loom-lower-affine: cannot lower '\(d0 mod -2\)'"
    with pytest.raises(LoomError, match=message):
        lower(module)


def test_result_types_unchanged():
    """i32 loads stay i32 (memref.load takes the element type)."""
    module = parse(
        """
        func.func @f(%m: memref<6x7xi32>) -> i32 {
          %a = affine.load %m[1, 2] : memref<6x7xi32>
          func.return %a : i32
        }
        """
    )
    lower(module)
    (load,) = [op for op in module.walk() if op.name == "memref.load"]
    assert load.results[0].type == i32
    assert run(module, "f", memref_i32(6, 7)) == (102,)
