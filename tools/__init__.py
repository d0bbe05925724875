"""Loom's command-line tools: loom-opt, loom-run, loom-bench (the console scripts of
pyproject.toml point at each module's `entry`)."""

import os
import sys
from collections.abc import Callable

#: what bad input raises through the Python API (compile(), a kernel's call): its message
#: is for the user. LoomError is a ValueError; MemoryError names the temporary that did
#: not fit. Anything else is a bug in Loom (or xDSL, or LLVM).
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, MemoryError)


def console_entry(main: Callable[[], int]) -> Callable[[], int]:
    """The console-script entry of a tool whose `main()` parses the command line:
    argparse's usage errors (exit status 2) exit 1 like every other bad input."""

    def entry() -> int:
        try:
            return main()
        except SystemExit as e:
            return 1 if e.code == 2 else e.code

    return entry


def version_text(tool: str) -> str:
    """What `--version` prints: Loom's version, then those of xDSL and LLVM (llvmlite's),
    the two it is built on."""
    from importlib.metadata import PackageNotFoundError, version

    import llvmlite
    from llvmlite import binding

    try:
        loom = version("loomir")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from compiler import __version__ as loom
    llvm = ".".join(map(str, binding.llvm_version_info))
    return f"{tool} (Loom) {loom}\nxDSL {version('xdsl')}\nLLVM {llvm} (llvmlite {llvmlite.__version__})"


def report_error(prefix: str, e: BaseException, user_errors: tuple[type[BaseException], ...] = USER_ERRORS) -> None:
    """Print `e` as one line on stderr, never a traceback: a located LoomError as it is
    (`file:line:col: error: ...`), another of `user_errors` as `PREFIX: error: message`,
    anything else as `PREFIX: error: internal compiler error: Type: first line`. Under
    LOOM_DEBUG an internal error is raised with its traceback instead. PREFIX is the
    tool's name, or the file the error is about."""
    from passes.support.diagnostics import LoomError

    if isinstance(e, LoomError) and e.location:
        print(e, file=sys.stderr)
    elif isinstance(e, LoomError):
        print(f"{prefix}: error: {e.message}", file=sys.stderr)
    elif isinstance(e, user_errors):
        print(f"{prefix}: error: {str(e) or ('out of memory' if isinstance(e, MemoryError) else type(e).__name__)}",
              file=sys.stderr)
    else:
        if os.environ.get("LOOM_DEBUG"):
            raise e
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        print(f"{prefix}: error: internal compiler error: {type(e).__name__}: {lines[0] if lines else ''}",
              file=sys.stderr)
