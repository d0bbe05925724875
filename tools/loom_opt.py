"""loom-opt: xdsl-opt with the loom dialect, Loom's passes and named pipelines, and
diagnostics as `file:line:col: error: message` (or `loom-opt: error: message` where there
is no location) instead of tracebacks."""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.printer import Printer
from xdsl.utils.arg_spec import parse_spec
from xdsl.utils.diagnostic import Diagnostic
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.xdsl_opt_main import _empty_post_init, xDSLOptMain

from passes.support.diagnostics import LoomError, deep_nesting, text_location

from passes.support.parser import parse_module

from passes.support.verifier import verify
from passes.support.remarks import collect
from tools import console_entry, report_error, version_text

PROG = "loom-opt"

#: what -t can print: Loom's IR, or what LLVM makes of it once it is in the llvm dialect
TARGET_HELP = (
    "output: mlir (the IR, default); llvm (LLVM IR); asm (the host's assembly, at O3 as "
    "compile() builds it{x86}). llvm and asm need IR in the llvm dialect: -p loom-naive, "
    "or -p default, or a schedule followed by the lowering"
)


def is_x86_64_host() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


class LoomOptMain(xDSLOptMain):
    # A copy of xDSLOptMain.__init__ as xDSL 0.74.0 writes it (xdsl/xdsl_opt_main.py),
    # pinned to that version (pyproject.toml) for two reasons: its ArgumentParser is made
    # inside __init__, with no hook to give it `prog`, a formatter or
    # conflict_handler="resolve" (which Loom's -h, -v, -t and -p need), and its context is
    # a plain Context made there too, before register_all_dialects. `_empty_post_init`,
    # private to xDSL, is what its --disable-verify puts in place of Attribute.__post_init__.
    # On an xDSL upgrade, diff this against the new __init__; the verifier Loom runs instead
    # of xDSL's (passes.support.verifier.verify_ops) is held to xDSL's own by
    # tests/test_diagnostics.py::test_verify_ops_agrees_with_xdsl_on_the_lit_corpus.
    def __init__(self, args: Sequence[str] | None = None):
        """xDSLOptMain's set-up, with a parser whose -h, -v, -t and -p are Loom's (they
        replace xDSL's: conflict_handler="resolve")."""
        self.available_frontends, self.available_passes, self.available_targets = {}, {}, {}
        self.register_all_dialects()
        self.register_all_frontends()
        self.register_all_passes()
        self.register_all_targets()
        arg_parser = argparse.ArgumentParser(
            prog=PROG, description="Loom modular optimizer driver", conflict_handler="resolve",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        self.register_all_arguments(arg_parser)
        self.args = arg_parser.parse_args(args=args)
        if parse_spec(self.args.target).name not in self.available_targets:
            arg_parser.error(f"argument -t/--target: invalid choice: '{self.args.target}' "
                             f"(choose from {', '.join(self.available_targets)})")
        self.ctx.allow_unregistered = self.args.allow_unregistered_dialect
        if self.args.disable_verify:
            Attribute.__post_init__ = _empty_post_init
        if self.args.syntax_highlight:
            Diagnostic.colored = True
        self.setup_pipeline()

    def register_all_dialects(self):
        from dialects.context import make_context

        self.ctx = make_context()

    def register_all_passes(self):
        from passes import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        """Only what Loom's IR can be printed as: xDSL's other targets (arm-asm, riscv-asm,
        x86-asm, csl, wat, wgsl, mps) print xDSL's own hardware dialects, which Loom never
        produces (they failed on it or printed nothing). x86-asm is the host's assembly
        on an x86-64 host."""
        from compiler.jit.emit import LoomAsmTarget, LoomLLVMTarget, LoomX86AsmTarget
        from xdsl.universe import Universe

        self.available_targets["mlir"] = Universe.get_multiverse().all_targets["mlir"]
        self.available_targets["llvm"] = lambda: LoomLLVMTarget
        self.available_targets["asm"] = lambda: LoomAsmTarget
        if is_x86_64_host():
            self.available_targets["x86-asm"] = lambda: LoomX86AsmTarget

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument("-h", "--help", action=LoomHelpAction, help="show this help message and exit")
        arg_parser.add_argument("-v", "--version", action=LoomVersionAction,
                                help="print the versions of Loom, xDSL and LLVM and exit")
        arg_parser.add_argument(
            "-t", "--target", type=target_spec, default="mlir", metavar="{" + ",".join(self.available_targets) + "}",
            help=TARGET_HELP.format(x86="; x86-asm: the same" if is_x86_64_host() else ""),
        )
        arg_parser.add_argument(
            "-p", "--passes", type=str, default="", metavar="PIPELINE",
            help="pass pipeline, run as given: a named pipeline (naive, default) or passes "
                 "'a,b{opt=v}', Loom's (listed above) or xDSL's (listed below)",
        )
        arg_parser.add_argument(
            "--remarks", action="store_true",
            help="print what each schedule pass did to which loop nest, and why it skipped one (stderr)",
        )
        arg_parser.add_argument(
            "--no-cache", action="store_true",
            help="accepted for symmetry with loom-run: loom-opt compiles no kernel, so it never reads or writes "
                 "the kernel cache",
        )

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.args.input_file in (None, "-"):
            return sys.stdin.buffer, "mlir"
        try:
            return open(self.args.input_file, "rb"), "mlir"
        except OSError as e:
            raise LoomError(f"cannot read input file '{self.args.input_file}': {e.strerror}") from None

    def get_input_name(self):
        return "<stdin>" if self.args.input_file in (None, "-") else self.args.input_file

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return sys.stdout
        try:
            return open(self.args.output_file, "w")
        except OSError as e:
            raise LoomError(f"cannot write output file '{self.args.output_file}': {e.strerror}") from None

    def setup_pipeline(self):
        from passes.pipelines import build

        started = time.perf_counter()

        def callback(previous_pass, module: ModuleOp, next_pass) -> None:
            nonlocal started
            if previous_pass is None:  # the input: parse_chunk verified it
                started = time.perf_counter()
                return
            if self.args.time_passes:
                print(f"{previous_pass.name}: {time.perf_counter() - started:.3f} s", file=sys.stderr)
            if not self.args.disable_verify:
                verify(module)
            if next_pass and self.args.print_between_passes:
                print(f"// -----// IR after {previous_pass.name} //----- //", file=sys.stderr)
                Printer(stream=sys.stderr).print_op(module)
                print(file=sys.stderr)
            started = time.perf_counter()

        self.pipeline = build(self.args.passes, callback)

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0):
        data = chunk.read()
        name = self.get_input_name()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            where = text_location(data, e.start, name)
            raise LoomError(f"input is not UTF-8 text (a binary file?): byte 0x{data[e.start]:02x}",
                            location=_shift(where, start_offset)) from None
        if "\x00" in text:
            where = text_location(data, data.index(b"\x00"), name)
            raise LoomError("input is not text (it contains NUL bytes)", location=_shift(where, start_offset))
        return parse_module(self.ctx, text, name, start_offset)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        with deep_nesting(prog, "printing"):
            return super().output_resulting_program(prog)

    def run(self) -> int:
        """Run every chunk; an error in one chunk is printed and the next goes on."""
        chunks, _ = self.prepare_input()
        out = self.prepare_output()
        failed = False
        try:
            for i, (chunk, offset) in enumerate(chunks):
                if i > 0:
                    out.write("// -----\n")
                with collect() as remarks:
                    try:
                        module = self.parse_chunk(chunk, "mlir", offset)
                        self.apply_passes(module)
                        out.write(self.output_resulting_program(module))
                    except LoomError as e:
                        failed = True
                        out.flush()
                        report_error(PROG, e)
                    finally:
                        out.flush()
                        if self.args.remarks:
                            for r in remarks:
                                print(r, file=sys.stderr)
        finally:
            if out is not sys.stdout:
                out.close()
        return 1 if failed else 0


def _shift(location: str, lines: int) -> str:
    """A `file:line:col` of a --split-input-file chunk, as a line of the whole file."""
    name, line, col = location.rsplit(":", 2)
    return f"{name}:{int(line) + lines}:{col}"


def target_spec(text: str) -> str:
    """-t's argument: a target name, maybe with options (`mlir{...}`), checked for syntax
    here so that a malformed one is a usage error."""
    try:
        parse_spec(text)
    except ArgSpecParseError as e:
        from passes.pipelines import syntax_message

        raise argparse.ArgumentTypeError(f"invalid target '{text}': {syntax_message(e)}") from None
    return text


def help_sections() -> tuple[str, str]:
    """The help's text above the options (Loom's passes and named pipelines) and below
    them (xDSL's passes)."""
    from passes.pipelines import PIPELINES, pass_summaries
    from passes import LOOM_PASSES, get_all_passes

    width = max(60, shutil.get_terminal_size().columns - 2)  # as argparse wraps the options
    lines = ["Parse MLIR with the loom dialect, run a pass pipeline (-p), print the result (-t).", "",
             "Loom's passes (-p 'a,b{opt=v}'):"]
    for usage, summary in pass_summaries():
        lines += textwrap.wrap(f"{usage}  {summary}", width, initial_indent="  ", subsequent_indent="      ")
    lines += ["", "Named pipelines (-p NAME; compile(pipeline=NAME); loom-run --pipeline NAME):"]
    for name, passes in PIPELINES.items():
        lines += textwrap.wrap(f"{name}  {', '.join(passes)}", width, initial_indent="  ",
                               subsequent_indent="      ", break_on_hyphens=False)
    xdsl = [name for name in get_all_passes() if name not in LOOM_PASSES]
    epilog = "\n".join([
        f"xDSL's passes (-p, {len(xdsl)}):",
        *textwrap.wrap(", ".join(xdsl), width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False),
        "",
        *textwrap.wrap("Errors are printed as file:line:col: error: message (loom-opt: error: message "
                       "where there is no location), exit status 1.", width),
    ])
    return "\n".join(lines), epilog


class LoomHelpAction(argparse.Action):
    """--help, with Loom's passes and pipelines first and xDSL's passes after the options
    (built only when asked for: it imports every pass)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.description, parser.epilog = help_sections()
        parser.print_help()
        parser.exit()


class LoomVersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text(PROG))
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        tool = LoomOptMain(args=argv)
        return tool.run()
    except KeyboardInterrupt:
        return 130
    except (Exception, ArgSpecParseError) as e:
        # A LoomError is the input's fault; anything else, a ValueError included, is a bug
        # in Loom or xDSL (what the fuzzer looks for): one line, not a traceback.
        report_error(PROG, e, user_errors=())
        return 1


entry = console_entry(main)


if __name__ == "__main__":
    sys.exit(entry())
