"""loom-opt: xdsl-opt with the loom dialect, Loom's passes and named pipelines, and
diagnostics as `file:line:col: error: message` instead of tracebacks."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from compiler.diagnostics import LoomError, parse_module, verify
from compiler.remarks import collect
from tools import console_entry


class LoomOptMain(xDSLOptMain):
    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="Loom modular optimizer driver", args=args)

    def register_all_dialects(self):
        from compiler.context import make_context

        self.ctx = make_context()

    def register_all_passes(self):
        from passes import get_all_passes

        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        from compiler.llvm_emit import LoomLLVMTarget

        self.available_targets["llvm"] = lambda: LoomLLVMTarget

    def register_all_arguments(self, arg_parser):
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--remarks", action="store_true",
            help="print what each schedule pass did to which loop nest, and why it skipped one (stderr)",
        )
        from passes import LOOM_PASSES

        arg_parser.epilog = (
            "Loom passes: "
            + ", ".join(sorted(LOOM_PASSES))
            + ". Errors are printed as file:line:col: error: message, exit status 1."
        )

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        if self.args.input_file in (None, "-"):
            return sys.stdin.buffer, "mlir"
        try:
            return open(self.args.input_file, "rb"), "mlir"
        except OSError as e:
            raise LoomError(f"cannot read input file: {e.strerror}", location=self.args.input_file) from None

    def get_input_name(self):
        return "<stdin>" if self.args.input_file in (None, "-") else self.args.input_file

    def setup_pipeline(self):
        def callback(previous_pass, module: ModuleOp, next_pass) -> None:
            if not self.args.disable_verify:
                verify(module)
            if previous_pass and next_pass and self.args.print_between_passes:
                print(f"// -----// IR after {previous_pass.name} //----- //", file=sys.stderr)
                Printer(stream=sys.stderr).print_op(module)
                print(file=sys.stderr)

        try:
            self.pipeline = PassPipeline.parse_spec(self.available_passes, self.args.passes, callback)
        except (Exception, ArgSpecParseError) as e:  # unknown pass or option, malformed list
            raise LoomError(f"invalid pass pipeline '{self.args.passes}': {e}") from None

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0):
        data = chunk.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise LoomError("input is not UTF-8 text (a binary file?)", location=self.get_input_name()) from None
        if "\x00" in text:
            raise LoomError("input is not text (it contains NUL bytes)", location=self.get_input_name())
        return parse_module(self.ctx, text, self.get_input_name(), start_offset)

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
                        print(e, file=sys.stderr)
                    finally:
                        out.flush()
                        if self.args.remarks:
                            for r in remarks:
                                print(r, file=sys.stderr)
        finally:
            if out is not sys.stdout:
                out.close()
        return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        tool = LoomOptMain(args=argv)
        return tool.run()
    except LoomError as e:
        print(e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except (Exception, ArgSpecParseError) as e:  # a bug in Loom or xDSL: one line, not a traceback
        if os.environ.get("LOOM_DEBUG"):
            raise
        print(f"error: internal compiler error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


entry = console_entry(main)


if __name__ == "__main__":
    sys.exit(entry())
