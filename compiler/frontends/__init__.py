"""The front ends: Python tracing (@loom.jit) and torch.fx (the torch backend)."""
