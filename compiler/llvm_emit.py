"""Placeholder: llvm dialect -> LLVM IR (to be replaced by the real emitter)."""
from dataclasses import dataclass
from xdsl.backend.llvm.convert import LLVMTarget


@dataclass(frozen=True)
class LoomLLVMTarget(LLVMTarget):
    pass
