"""Loom's version: the distribution's (pyproject.toml reads it from here), and part of the
disk cache's key (compiler/jit/disk_cache.py). A module of its own, importing nothing:
the cache reads it without importing the `compiler` package's API."""

__version__ = "0.1.0"
