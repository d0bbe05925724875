"""What the lowering to LLVM and the runtime's buffer pool (compiler/jit/pool.py) agree on
about heap allocations. No xDSL here: a kernel loaded from the disk cache runs without it."""

#: the alignment of every heap buffer a kernel allocates (a cache line, the widest vector)
HEAP_ALIGNMENT = 64
#: allocations of at least this many bytes go through the pool (smaller ones come from
#: malloc's own free lists, without page faults); a kernel's outputs too
MIN_BYTES = 64 * 1024
