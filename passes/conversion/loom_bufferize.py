"""loom-bufferize: tensors -> memrefs, in destination-passing style.

For each function that takes or returns tensors:

- tensor arguments become memref arguments of the same shape (zero copy: the caller's
  buffers are read in place), row-major, or with the strides their
  `{loom.buffer_layout = strided<[...]>}` attribute gives (a numpy view passed as it is:
  `dialects.loom.argument_buffer_type`);
- tensor results become trailing out-parameters, and the function returns nothing;
- each loom compute op writes into a destination: the out-parameter when its value is
  returned, else a fresh `memref.alloc` that is freed (`memref.dealloc`) right after the
  last use of it or of a view of it, so nothing leaks across calls and few temporaries
  are alive at a time;
- each view op (`loom.transpose`, `loom.slice`, `loom.broadcast_to`, `loom.reshape`)
  becomes a `memref.reinterpret_cast` of its operand's buffer to the strided layout the
  op gives it (`view_layout`: permuted strides, a slice's offset and multiplied strides,
  stride 0 along a broadcast dimension): no copy, no allocation. A reshape that no
  strides can express (merging dimensions of a view that are not contiguous with each
  other, as numpy's `reshape` would copy) copies its operand into a row-major buffer
  first, with a remark saying so;
- `loom.contiguous` copies (`memref.copy`) an operand that is not row-major into a fresh
  buffer; a row-major one is used as it is (tensors are values: a copy of it is it);
- a returned value is computed straight into its out-parameter when it is a compute op's
  result, a copy's, or a row-major reshape of one (the out-parameter is then viewed in
  that op's shape); any other (an argument returned as is, the same value returned
  twice, a strided view) is copied into its out-parameter with `memref.copy`.

```mlir
func.func @f(%a: tensor<4x3xf32> {loom.buffer_layout = strided<[1, 4]>}, %b: tensor<3x5xf32>) -> tensor<5x4xf32> {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  %t = loom.transpose %c {perm = array<i64: 1, 0>} : tensor<4x5xf32> -> tensor<5x4xf32>
  %r = loom.relu %t : tensor<5x4xf32>
  func.return %r : tensor<5x4xf32>
}
// becomes
func.func @f(%a: memref<4x3xf32, strided<[1, 4]>>, %b: memref<3x5xf32>, %r: memref<5x4xf32>) {
  %c = memref.alloc() : memref<4x5xf32>
  loom.matmul ins(%a, %b : memref<4x3xf32, strided<[1, 4]>>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
  %t = memref.reinterpret_cast %c to offset: [0], sizes: [5, 4], strides: [1, 5] : memref<4x5xf32> to memref<5x4xf32, strided<[1, 5]>>
  loom.relu ins(%t : memref<5x4xf32, strided<[1, 5]>>) outs(%r : memref<5x4xf32>)
  memref.dealloc %c : memref<4x5xf32>
  func.return
}
```
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, MemRefType, ModuleOp, NoneAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import VerifyException

from passes.support.diagnostics import LoomError
from passes.support.remarks import remark
from dialects.loom import (
    BUFFER_LAYOUT,
    ContiguousOp,
    LoomComputeOp,
    LoomViewOp,
    ReshapeOp,
    argument_buffer_type,
)
from dialects.layout import memref_root, reinterpret, static_strides, strided_memref

PASS = "loom-bufferize"


def to_memref(t: Attribute) -> Attribute:
    if isinstance(t, TensorType):
        return MemRefType(t.get_element_type(), t.get_shape())
    return t


def _shape(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def _returned_chains(ret: func.ReturnOp) -> list[set[SSAValue]]:
    """Per returned value: the values whose buffer, if fresh and row-major, can be its
    out-parameter viewed in their shape: the value, and back through the reshapes and
    contiguous copies it is made of (a row-major reshape or copy of the out-parameter
    is the out-parameter, in that shape)."""
    chains = []
    for v in ret.arguments:
        chain = {v}
        while isinstance(owner := v.owner, ReshapeOp | ContiguousOp):
            v = owner.input
            chain.add(v)
        chains.append(chain)
    return chains


@dataclass
class _Bufferizer:
    """The state of one function's bufferization: where each tensor value lives."""

    rewriter: PatternRewriter
    out_params: dict[int, SSAValue]  # return slot -> out-parameter
    chains: list[set[SSAValue]]  # return slot -> `_returned_chains`
    claimed: set[int] = field(default_factory=set)  # slots whose out-parameter a value was put in
    temporaries: list[SSAValue] = field(default_factory=list)
    views: list[Operation] = field(default_factory=list)  # the view ops made

    def drop_unused_views(self) -> None:
        """Erase the views nothing reads: a returned reshape of a value computed into its
        out-parameter (the return, now gone, was its use)."""
        for view in reversed(self.views):
            if not view.results[0].uses:
                self.rewriter.erase(view)

    def fresh(self, value: SSAValue, before: Operation) -> SSAValue:
        """A fresh row-major buffer for tensor `value`, made before `before`: the
        out-parameter of the first returned value whose chain holds it (viewed in its
        shape), else a temporary (freed after its last use)."""
        t = value.type
        assert isinstance(t, TensorType)
        for slot, out in self.out_params.items():
            if slot not in self.claimed and value in self.chains[slot]:
                self.claimed.add(slot)
                return self.reshaped(out, t.get_shape(), before)
        alloc = memref.AllocOp.get(t.get_element_type(), shape=t.get_shape())
        alloc.location = before.location  # where an allocation failure points
        self.rewriter.insert(alloc, InsertPoint.before(before))
        self.temporaries.append(alloc.memref)
        return alloc.memref

    def compute(self, op: LoomComputeOp) -> None:
        """Value form -> destination-passing form, into `fresh`'s buffer."""
        result = op.res[0]
        dest = self.fresh(result, op)
        new = type(op)(
            list(op.ins),
            out=dest,
            properties={k: v for k, v in op.properties.items() if k != "operandSegmentSizes"},
        )
        new.location = op.location
        self.rewriter.insert(new, InsertPoint.before(op))
        self.replace(op, dest)

    def view(self, op: LoomViewOp) -> None:
        """A view op -> a reinterpret_cast of its operand's buffer (the operand itself when
        the layout is the same). `loom.contiguous` of a buffer that is not row-major, and
        a reshape that no strides express, copy into `fresh`'s buffer instead."""
        source = op.input
        src_t = source.type
        assert isinstance(src_t, MemRefType)
        layout = static_strides(src_t)
        assert layout is not None, "a view's operand is a tensor: its buffer's layout is static"
        if isinstance(op, ContiguousOp):
            self.replace(op, source if isinstance(src_t.layout, NoneAttr) else self.copy(op, source))
            return
        found = op.view_layout(*layout)
        if found is None:
            assert isinstance(op, ReshapeOp)
            remark(PASS, op, f"reshape of {_shape(op.input_shape)} to {_shape(op.result_shape)} copies its "
                   f"operand: laid out as {src_t}, the dimensions it merges are not contiguous with each other, so no "
                   "strides give the result (numpy's reshape copies there too); to keep it a view, reshape before the "
                   "transpose or slice, or merge only dimensions that stay contiguous", missed=True)
            self.replace(op, self.copy(op, source))
            return
        result_t = strided_memref(src_t.get_element_type(), op.result_shape, *found)
        if result_t == src_t:
            self.replace(op, source)
            return
        cast = reinterpret(source, result_t)
        cast.location = op.location
        self.rewriter.insert(cast, InsertPoint.before(op))
        self.views.append(cast)
        self.replace(op, cast.result)

    def copy(self, op: LoomViewOp, source: SSAValue) -> SSAValue:
        """`source`'s elements copied, in row-major order, into `fresh`'s buffer for the
        op's result (viewed in the source's shape for the copy, if a reshape's): the
        buffer, in the result's shape."""
        src_t = source.type
        assert isinstance(src_t, MemRefType)
        buffer = self.fresh(op.result, op)
        copy = memref.CopyOp(source, self.reshaped(buffer, src_t.get_shape(), op))
        copy.location = op.location
        self.rewriter.insert(copy, InsertPoint.before(op))
        return buffer

    def reshaped(self, buffer: SSAValue, shape, before: Operation) -> SSAValue:
        """Row-major `buffer` viewed in `shape` (a reinterpret_cast before `before`), or
        itself when it has that shape."""
        t = buffer.type
        assert isinstance(t, MemRefType)
        if tuple(t.get_shape()) == tuple(shape):
            return buffer
        view = reinterpret(buffer, MemRefType(t.get_element_type(), shape))
        view.location = before.location
        self.rewriter.insert(view, InsertPoint.before(before))
        return view.result

    def replace(self, op: Operation, buffer: SSAValue) -> None:
        self.rewriter.replace_all_uses_with(op.results[0], buffer)
        self.rewriter.erase(op)

    def free_temporaries(self, block) -> None:
        """Each temporary freed right after the last op that uses it or a view of it:
        the buffers live at a time stay few (a chain of n ops holds two, not n), and so
        do the live pointers LLVM has to keep in registers or spill."""
        last_use: dict[SSAValue, Operation] = {}
        held = set(self.temporaries)
        for inner in block.ops:  # (the return holds no memref: it returns the non-tensor results)
            for v in inner.operands:
                root = memref_root(v) if isinstance(v.type, MemRefType) else None
                if root in held:
                    last_use[root] = inner
        for buf in reversed(self.temporaries):  # freed in allocation order after a shared last use
            self.rewriter.insert(memref.DeallocOp.get(buf), InsertPoint.after(last_use[buf]))


def _argument_types(op: func.FuncOp) -> list[Attribute]:
    """The bufferized type of each argument (`argument_buffer_type`), errors at `op`."""
    try:
        return [argument_buffer_type(op, i) for i in range(len(op.function_type.inputs))]
    except VerifyException as e:
        raise LoomError(f"{PASS}: {e}", op) from None


def _drop_buffer_layouts(op: func.FuncOp, arguments: int) -> None:
    """The argument attributes without `loom.buffer_layout` (now in the memref types),
    one dictionary per argument (the out-parameters get empty ones); none if all empty."""
    if op.arg_attrs is None:
        return
    kept = [{k: v for k, v in d.data.items() if k != BUFFER_LAYOUT} for d in op.arg_attrs.data]
    kept += [{}] * (arguments - len(kept))
    op.arg_attrs = ArrayAttr([DictionaryAttr(d) for d in kept]) if any(kept) else None


class BufferizeFunc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter) -> None:
        ftype = op.function_type
        if not any(isinstance(t, TensorType) for t in (*ftype.inputs, *ftype.outputs)):
            return
        if not op.body.blocks:
            raise LoomError("cannot bufferize a function declaration with tensor types", op)
        if len(op.body.blocks) != 1:
            raise LoomError("loom-bufferize expects a single-block function body", op)
        if op.res_attrs is not None and any(BUFFER_LAYOUT in d.data for d in op.res_attrs.data):
            raise LoomError(f"{PASS}: '{BUFFER_LAYOUT}' on a result: results are fresh row-major arrays (only "
                            "arguments take a buffer layout)", op)
        block = op.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        for inner in block.ops:
            tensor_typed = any(isinstance(v.type, TensorType) for v in (*inner.operands, *inner.results))
            if tensor_typed and not isinstance(inner, LoomComputeOp | LoomViewOp | func.ReturnOp):
                raise LoomError(f"loom-bufferize cannot bufferize '{inner.name}' on tensors", inner)
        arg_types = _argument_types(op)

        # 1. Arguments: tensor -> memref (with its buffer layout), in place.
        for arg, t in zip(block.args, arg_types):
            if isinstance(arg.type, TensorType):
                rewriter.replace_value_with_new_type(arg, t)

        # 2. Results: tensor results become trailing out-parameters.
        kept_results: list[SSAValue] = []
        out_params: dict[int, SSAValue] = {}  # index in the return -> out param
        for i, (v, t) in enumerate(zip(ret.arguments, ftype.outputs.data)):
            if isinstance(t, TensorType):
                out_params[i] = block.insert_arg(to_memref(t), len(block.args))
            else:
                kept_results.append(v)

        # 3. Ops: value form -> destination-passing form; views -> memref views.
        state = _Bufferizer(rewriter, out_params, _returned_chains(ret))
        for inner in list(block.ops):
            if isinstance(inner, LoomComputeOp) and not inner.is_bufferized:
                state.compute(inner)
            elif isinstance(inner, LoomViewOp):
                state.view(inner)

        # 4. Copies for returned values that are not in their slot (an argument, a value
        #    returned twice, a strided view), then the frees, then the return of the
        #    non-tensor results.
        for i, out in out_params.items():
            src = ret.arguments[i]
            if memref_root(src) is out and src.type == out.type:
                continue  # computed in place (`_Bufferizer.fresh`)
            rewriter.insert(memref.CopyOp(src, out), InsertPoint.before(ret))
        rewriter.replace(ret, func.ReturnOp(*kept_results))
        state.drop_unused_views()
        state.free_temporaries(block)

        op.function_type = FunctionType.from_lists(
            [a.type for a in block.args], [v.type for v in kept_results]
        )
        _drop_buffer_layouts(op, len(block.args))


@dataclass(frozen=True)
class LoomBufferizePass(ModulePass):
    name = "loom-bufferize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(BufferizeFunc(), apply_recursively=False).rewrite_module(op)
