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
