"""The lowering to the llvm dialect, in pieces (MLIR's Conversion/*ToLLVM and LLVMCommon):
the calling convention (abi.py), the shared machinery (common.py), and one file of
patterns per source dialect. The pass that gathers them is loom-convert-to-llvm
(passes/conversion/loom_convert_to_llvm.py)."""
