"""loom-bench's modes: matmul shapes, convolutions, models, fusion, compile time."""
