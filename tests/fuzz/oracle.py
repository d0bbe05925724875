"""The oracle's parent side: the steps a case runs, the worker process that runs them
under a time bound, the verdicts, and the reproducer files.

Every step must end in a clean error or a success (checked against numpy where the
reference applies). The worker (worker.py) judges what it can see in-process; what
kills it (a signal, an abort from LLVM, a kernel writing out of bounds) is a `crash`,
what outlives the time bound a `hang`. Either way the worker is restarted and the run
goes on.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .corpus import ROOT
from .mutations import Case

FAILURES = ("traceback", "internal", "badmsg", "crash", "hang", "wrong")
TILE_VECTORIZE = "loom-bufferize,convert-loom-to-affine,loom-tile{sizes=4,4,4},loom-vectorize"


@dataclass(frozen=True)
class Step:
    label: str  # what the summary and the dedup key call it: "loom-opt -p loom-naive", "compile(mutated)"
    command: str  # how to run it by hand on the case's file
    spec: dict  # what the worker is sent


def steps(case: Case) -> list[Step]:
    """loom-opt with no pipeline, three fixed ones and the case's; compile() with
    `naive`, `default` and the case's pipeline, each then called. The fixed pipelines are
    skipped on text that does not parse (they would repeat the parse error)."""
    mutated = ["-p", case.pipeline] + (["-t", "llvm"] if case.to_llvm else [])
    env = f"LOOM_TARGET={case.target} " if case.target else ""
    opt = [("loom-opt", [], False), ("loom-opt -p loom-naive", ["-p", "loom-naive"], True),
           ("loom-opt -p loom-default", ["-p", "loom-default"], True),
           ("loom-opt -p tile,vectorize", ["-p", TILE_VECTORIZE], True), ("loom-opt -p mutated", mutated, False)]
    found = [Step(label, f"{env}loom-opt FILE " + " ".join(_quote(a) for a in argv),
                  {"kind": "opt", "argv": argv, "needs_parse": fixed}) for label, argv, fixed in opt]
    for label, pipeline, fixed in [("compile(naive)", "naive", True), ("compile(default)", "default", True),
                                   ("compile(mutated)", case.pipeline or "naive", False)]:
        found.append(Step(label, f"{env}compiler.compile(open(FILE).read(), pipeline={pipeline!r}) and a call",
                          {"kind": "compile", "pipeline": pipeline, "needs_parse": fixed}))
    return found


def _quote(arg: str) -> str:
    return arg if re.fullmatch(r"[\w.,=/-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


@dataclass(frozen=True)
class Verdict:
    step: Step
    outcome: str
    message: str = ""
    exc: str = ""
    where: str = ""  # path:function:line of the innermost Loom (else xDSL) frame
    xdsl: str = ""
    phase: str = ""  # compile, call or reference

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    def key(self) -> str:
        """What two verdicts share when they are one bug: the exception and the Loom frame
        it comes from (no line number, which moves as the code changes); a message's shape
        for a bad message; the step for a crash, hang or wrong result."""
        if self.outcome in ("traceback", "internal"):
            return f"{self.outcome} {self.exc or '?'} at {self.where.rsplit(':', 1)[0] or self.step.label}"
        if self.outcome == "badmsg":  # the message up to its first detail: "error: loom-pack"
            head = re.split(r"[:'\"%@\d]", self.message.split(": error: ")[-1].removeprefix("error: "))[0]
            return f"badmsg in {self.step.label.split()[0]}: {' '.join(head.split()[:5])}"
        return f"{self.outcome} in {self.step.label} {self.phase}".strip()

    def describe(self) -> str:
        where = f" [{self.exc} at {self.where}{', xdsl ' + self.xdsl if self.xdsl and self.xdsl != self.where else ''}]"
        return f"{self.step.label}: {self.outcome}{where if self.exc else ''}: {self.message}"


class Worker:
    """A worker process, started on demand, restarted after a crash or hang and every
    `recycle` cases (the JIT keeps every kernel it compiled)."""

    def __init__(self, timeout: float = 20.0, recycle: int = 200, memory: int = 4 << 30):
        self.timeout, self.recycle, self.memory = timeout, recycle, memory
        self.proc: subprocess.Popen | None = None
        self.cases = 0
        self.scratch = tempfile.TemporaryDirectory(prefix="loom-fuzz-")
        self.log = Path(self.scratch.name) / "worker.log"
        self._log_file = None
        self._buffer = b""

    def run(self, case: Case) -> list[Verdict]:
        if self.proc is None or self.proc.poll() is not None or self.cases >= self.recycle:
            self._start()
        self.cases += 1
        todo = steps(case)
        job = {"text": case.text, "target": case.target, "steps": [s.spec for s in todo]}
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()
        verdicts: list[Verdict] = []
        phase = ""
        while len(verdicts) < len(todo):
            step = todo[len(verdicts)]
            line = self._read_line(self.timeout)
            if line is None or line == b"":
                verdicts.append(self._lost(step, phase, hung=line is None))
                verdicts += [Verdict(s, "skipped", "after a crash or hang") for s in todo[len(verdicts):]]
                break
            fields = json.loads(line)
            if "progress" in fields:
                phase = fields["progress"]
                continue
            verdicts.append(Verdict(step, **fields))
            phase = ""
        return verdicts

    def _lost(self, step: Step, phase: str, *, hung: bool) -> Verdict:
        """The worker died or hung in `step`: say how, and restart it for the next case."""
        phase = phase or ("compile" if step.spec["kind"] == "compile" else "")
        if hung:
            self.close()
            return Verdict(step, "hang", f"no answer within {self.timeout:g} s", phase=phase)
        rc = self.proc.wait()
        tail = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
        self.close()
        return Verdict(step, "crash", f"worker {how}: {' | '.join(tail)}", phase=phase)

    def _start(self) -> None:
        self.close()
        self._log_file = self.log.open("wb")
        env = {k: v for k, v in os.environ.items() if k != "LOOM_DEBUG"}
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", LOOM_FUZZ_MEMORY=str(self.memory),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("worker.py"))], cwd=self.scratch.name, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file, start_new_session=True,
        )
        self.cases, self._buffer = 0, b""
        if not self._read_line(120):
            raise RuntimeError(f"the fuzz worker did not start: {self.log.read_text(errors='replace')[-2000:]}")

    def _read_line(self, timeout: float) -> bytes | None:
        """The next protocol line; b"" when the worker is gone, None after `timeout` s."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
        self.scratch.cleanup()


# --------------------------------------------------------------------------------------
# Reproducers


def reproducer(case: Case, v: Verdict) -> str:
    """The case's text with a trailer that says how it fails and how to run it (at the
    end, so that line numbers in messages match the file)."""
    trailer = [
        f"fuzz: {v.describe()}",
        f"fuzz-key: {v.key()}",
        f"fuzz-run: {v.step.command}",
        f"fuzz-pipeline: {case.pipeline}",
        f"fuzz-to-llvm: {str(case.to_llvm).lower()}",
        f"fuzz-target: {case.target}",
        f"fuzz-seed: {case.seed}",
        f"fuzz-mutations: {list(case.mutations)}",
    ]
    return case.text.rstrip("\n") + "\n" + "".join(f"// {ln}\n" for ln in trailer)


def save(directory: Path, case: Case, v: Verdict) -> Path:
    """Write the case for v's key, keeping the shortest case seen for that key."""
    directory.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^\w.-]+", "_", v.key()).strip("_")[:120]
    path = directory / f"{slug}.mlir"
    text = reproducer(case, v)
    if not path.exists() or len(text) < len(path.read_text()):
        path.write_text(text)
    return path


def load_reproducer(path: Path) -> Case:
    """A saved reproducer as a case (its trailer gives the pipeline), to run it again."""
    text = path.read_text()
    fields = dict(re.findall(r"^// (fuzz-[\w-]+): (.*)$", text, flags=re.M))
    return Case(seed=str(path), text=text, mutations=(), pipeline=fields.get("fuzz-pipeline", ""),
                to_llvm=fields.get("fuzz-to-llvm") == "true", target=fields.get("fuzz-target", ""))


# --------------------------------------------------------------------------------------
# Failing a test


class FuzzFailure(AssertionError):
    """A case that did not end in a clean error or a checked result."""


_failure_types: dict[str, type[FuzzFailure]] = {}


def failure(key: str, message: str) -> FuzzFailure:
    """An exception of a class of its own per dedup key: hypothesis tells bugs apart by
    exception type and place, so each distinct failure is shrunk and reported on its own."""
    if key not in _failure_types:
        _failure_types[key] = type(f"FuzzFailure_{len(_failure_types)}", (FuzzFailure,), {})
    return _failure_types[key](message)


def assert_clean(case: Case, verdicts: list[Verdict], save_dir: Path | None = None) -> None:
    """Raise a FuzzFailure for the case's first failing step (saving a reproducer for
    each failing step under `save_dir`)."""
    bad = [v for v in verdicts if v.failed]
    for v in bad:
        if save_dir is not None:
            save(save_dir, case, v)
    if bad:
        report = "\n".join(v.describe() for v in bad)
        raise failure(bad[0].key(), f"{report}\n\n{reproducer(case, bad[0])}")
