"""A worker of `compiler.driver.compile_in_parallel`, run as `python -m compiler.worker`:
compile() each job read from stdin (a JSON list of compile()'s keywords), which files its
kernel in the disk cache. A job's error is left to the parent, whose own compile() of
it says it."""

import json
import sys

from compiler.driver import compile


def main() -> None:
    for job in json.load(sys.stdin):
        try:
            compile(**job)
        except Exception:  # the parent compiles it again, and reports it
            pass


if __name__ == "__main__":
    main()
