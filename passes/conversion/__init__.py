"""Conversions: the loom dialect to affine loops, and affine loops to the llvm dialect."""
