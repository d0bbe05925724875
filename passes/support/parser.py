"""The parser: xDSL's, recording each op's source position as a `FileLineColLoc`, so that a
verifier failure or a pass that refuses an op can point at the line the user wrote, the way
mlir-opt does. Every failure is a LoomError at the place it happened; what parses is
verified (passes/support/verifier.py).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import (
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
)
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from passes.support.diagnostics import LoomError, deep_nesting, short_message, too_deep
from passes.support.verifier import verify

# --------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------


class LocatedParser(Parser):
    """xDSL's parser, recording each op's position as its location."""

    def parse_operation(self) -> Operation:
        start = self._current_token.span.get_location()
        op = super().parse_operation()
        if not isinstance(op.location, FileLineColLoc):
            op.location = FileLineColLoc(
                StringAttr(start.file), IntAttr(start.line), IntAttr(start.col)
            )
        return op


def parse_module(ctx: Context, text: str, filename: str = "<input>", line_offset: int = 0) -> ModuleOp:
    """Parse MLIR text into a verified module; every failure is a LoomError."""
    parser = None

    def where() -> str:
        if parser is None:
            return filename
        loc = parser._current_token.span.get_location()
        return f"{loc.file}:{loc.line + line_offset}:{loc.col}"

    try:
        with deep_nesting(what="parsing"):
            parser = LocatedParser(ctx, text, filename)
            module = parser.parse_module()
    except ParseError as e:
        if parser is not None and e.msg.startswith("values used but not defined"):
            _undefined_value(parser, line_offset)
        loc = e.span.get_location()
        raise LoomError(e.msg, location=f"{loc.file}:{loc.line + line_offset}:{loc.col}") from None
    except UnicodeDecodeError:
        raise LoomError(f"{filename} is not UTF-8 text (a binary file?)") from None
    except RecursionError:
        raise LoomError(too_deep(None, "parsing"), location=where()) from None
    except LoomError:
        raise
    except (NotImplementedError, VerifyException, ValueError) as e:
        # xDSL raises these for syntax it does not support (semi-affine maps, say)
        raise LoomError(f"unsupported or invalid syntax: {short_message(str(e))}", location=where()) from None
    except Exception as e:  # xDSL's parser crashing on malformed input (a block label defined twice)
        raise LoomError(f"invalid syntax (xDSL's parser failed here with {type(e).__name__}: {short_message(str(e))})",
                        location=where()) from None
    if line_offset:
        for op in module.walk():
            if isinstance(op.location, FileLineColLoc):
                op.location = FileLineColLoc(
                    op.location.filename, IntAttr(op.location.line.data + line_offset), op.location.column
                )
    verify(module)
    return module


def _undefined_value(parser: Parser, line_offset: int) -> None:
    """xDSL reports values used but never defined (in scope) at the end of the input: raise
    the first such use at the op that uses it, as MLIR does."""
    first: tuple[int, int, str, Operation] | None = None
    for name, refs in parser.forward_ssa_references.items():
        for value in refs.values():
            for use in value.uses:
                loc = use.operation.location
                if isinstance(loc, FileLineColLoc):
                    key = (loc.line.data, loc.column.data, name, use.operation)
                    if first is None or key[:2] < first[:2]:
                        first = key
    if first is not None:
        line, col, name, op = first
        raise LoomError(f"use of undefined value %{name} (not defined before this use, or defined in "
                        f"a region that does not enclose it)",
                        location=f"{op.location.filename.data}:{line + line_offset}:{col}")


