"""loom-bufferize: tensors -> memrefs, in destination-passing style.

For each function that takes or returns tensors:

- tensor arguments become memref arguments of the same shape (zero copy: the caller's
  buffers are read in place);
- tensor results become trailing out-parameters, and the function returns nothing;
- each loom op writes into a destination: the out-parameter when its value is returned,
  else a fresh `memref.alloc` that is freed (`memref.dealloc`) right after its last use,
  so nothing leaks across calls and few temporaries are alive at a time;
- a returned value that is not computed in the function (an argument returned as is, or
  the same value returned twice) is copied into its out-parameter with `memref.copy`.

```mlir
func.func @f(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>) -> tensor<4x5xf32> {
  %c = loom.matmul %a, %b : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  func.return %c : tensor<4x5xf32>
}
// becomes
func.func @f(%a: memref<4x3xf32>, %b: memref<3x5xf32>, %c: memref<4x5xf32>) {
  loom.matmul ins(%a, %b : memref<4x3xf32>, memref<3x5xf32>) outs(%c : memref<4x5xf32>)
  func.return
}
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import FunctionType, MemRefType, ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from compiler.diagnostics import LoomError
from dialects.loom import LoomComputeOp


def to_memref(t: Attribute) -> Attribute:
    if isinstance(t, TensorType):
        return MemRefType(t.get_element_type(), t.get_shape())
    return t


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
        block = op.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        for inner in block.ops:
            tensor_typed = any(isinstance(v.type, TensorType) for v in (*inner.operands, *inner.results))
            if tensor_typed and not isinstance(inner, LoomComputeOp | func.ReturnOp):
                raise LoomError(f"loom-bufferize cannot bufferize '{inner.name}' on tensors", inner)

        # 1. Arguments: tensor -> memref, in place.
        for arg in block.args:
            if isinstance(arg.type, TensorType):
                rewriter.replace_value_with_new_type(arg, to_memref(arg.type))

        # 2. Results: tensor results become trailing out-parameters.
        kept_results: list[SSAValue] = []
        out_params: dict[int, SSAValue] = {}  # index in the return -> out param
        for i, (v, t) in enumerate(zip(ret.arguments, ftype.outputs.data)):
            if isinstance(t, TensorType):
                out_params[i] = block.insert_arg(to_memref(t), len(block.args))
            else:
                kept_results.append(v)

        # Which out-parameter each op result can write straight into: the first return
        # slot it fills, when it is an op result (not an argument).
        dest_for: dict[SSAValue, SSAValue] = {}
        copies: list[tuple[SSAValue, SSAValue]] = []
        for i, out in out_params.items():
            v = ret.arguments[i]
            if isinstance(v.owner, LoomComputeOp) and v not in dest_for:
                dest_for[v] = out
            else:
                copies.append((v, out))

        # 3. Ops: value form -> destination-passing form.
        temporaries: list[SSAValue] = []
        buffer_of: dict[SSAValue, SSAValue] = {}  # old tensor result -> its buffer
        for inner in list(block.ops):
            if not isinstance(inner, LoomComputeOp) or inner.is_bufferized:
                continue
            result = inner.res[0]
            dest = dest_for.get(result)
            if dest is None:
                alloc = memref.AllocOp.get(
                    result.type.get_element_type(), shape=result.type.get_shape()
                )
                alloc.location = inner.location  # where an allocation failure points
                rewriter.insert(alloc, InsertPoint.before(inner))
                dest = alloc.memref
                temporaries.append(dest)
            new = type(inner)(
                list(inner.ins),
                out=dest,
                properties={k: v for k, v in inner.properties.items() if k != "operandSegmentSizes"},
            )
            new.location = inner.location
            rewriter.insert(new, InsertPoint.before(inner))
            rewriter.replace_all_uses_with(result, dest)
            buffer_of[result] = dest
            rewriter.erase(inner)

        # 4. Copies for returned values that were not computed into their slot, then
        #    return the non-tensor results. Each temporary is freed right after its last
        #    use: the buffers live at a time stay few (a chain of n ops holds two, not n),
        #    and so do the live pointers LLVM has to keep in registers or spill.
        for src, out in copies:
            rewriter.insert(memref.CopyOp(buffer_of.get(src, src), out), InsertPoint.before(ret))
        last_use: dict[SSAValue, Operation] = {}
        held = set(temporaries)
        for inner in block.ops:
            for v in inner.operands:
                if v in held:
                    last_use[v] = inner
        for buf in reversed(temporaries):  # freed in allocation order after a shared last use
            rewriter.insert(memref.DeallocOp.get(buf), InsertPoint.after(last_use[buf]))
        new_ret = func.ReturnOp(*kept_results)
        rewriter.replace(ret, new_ret)

        op.function_type = FunctionType.from_lists(
            [a.type for a in block.args], [v.type for v in kept_results]
        )


@dataclass(frozen=True)
class LoomBufferizePass(ModulePass):
    name = "loom-bufferize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(BufferizeFunc(), apply_recursively=False).rewrite_module(op)
