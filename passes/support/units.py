"""Sizes in words, for remarks, target descriptions and reports: one format everywhere."""

from __future__ import annotations


#: the binary units, largest first
_UNITS = (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def format_bytes(n: float) -> str:
    """`n` bytes as people write them: `512 B`, `32 KiB`, `1.5 KiB`, `1 MiB`, `58.8 MiB`,
    `37.3 GiB` (three significant digits, no trailing zeros; whole units of 1,024 and more
    in full)."""
    for unit, scale in _UNITS:
        if n >= scale:
            return f"{n / scale:.3g} {unit}" if n < 1000 * scale else f"{n / scale:.0f} {unit}"
    return f"{n:.3g} B"
