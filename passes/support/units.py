"""Sizes in words, for remarks, target descriptions and reports: one format everywhere."""

from __future__ import annotations


def format_bytes(n: float) -> str:
    """`n` bytes as people write them: `512 B`, `32 KiB`, `1.5 KiB`, `1 MiB`, `58.8 MiB`
    (three significant digits at most, no trailing zeros)."""
    if n < 1024:
        return f"{n:.3g} B"
    if n < 1 << 20:
        return f"{n / 1024:.3g} KiB"
    return f"{n / (1 << 20):.3g} MiB"
