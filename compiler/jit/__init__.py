"""The JIT runtime: LLVM IR emission, the MCJIT engine, the object loader, Kernel, the buffer pool, the disk cache."""
