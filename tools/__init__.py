"""Loom's command-line tools: loom-opt, loom-run, loom-bench (the console scripts of
pyproject.toml point at each module's `entry`)."""

from collections.abc import Callable


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
