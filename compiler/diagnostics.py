"""Diagnostics in the form `file:line:col: error: message`.

The parser here records each op's source position as a `FileLineColLoc`, so a verifier
failure or a pass that refuses an op can point at the line the user wrote, the way
mlir-opt does. `LoomError` is what every Loom component raises for bad input; it is a
`ValueError`, so the Python API raises the same message the CLI prints.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException


class LoomError(ValueError):
    """A user-facing error. `str(e)` is `file:line:col: error: message` when the location
    is known, `error: message` otherwise."""

    def __init__(self, message: str, op: Operation | None = None, location: str | None = None):
        self.message = message
        if location is None and op is not None:
            location = op_location(op)
        self.location = location
        super().__init__(f"{location}: error: {message}" if location else f"error: {message}")


def op_location(op: Operation) -> str | None:
    """`file:line:col` of the op, or of its closest ancestor that has one."""
    cur: Operation | None = op
    while cur is not None:
        loc = cur.location
        if isinstance(loc, FileLineColLoc):
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        cur = cur.parent_op()
    return None


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
    try:
        parser = LocatedParser(ctx, text, filename)
        module = parser.parse_module()
    except ParseError as e:
        loc = e.span.get_location()
        raise LoomError(e.msg, location=f"{loc.file}:{loc.line + line_offset}:{loc.col}") from None
    except UnicodeDecodeError:
        raise LoomError(f"{filename} is not UTF-8 text (a binary file?)") from None
    except (NotImplementedError, VerifyException, ValueError) as e:
        # xDSL raises these for syntax it does not support (semi-affine maps, say)
        where = filename
        if parser is not None:
            loc = parser._current_token.span.get_location()
            where = f"{loc.file}:{loc.line + line_offset}:{loc.col}"
        raise LoomError(f"unsupported or invalid syntax: {e}", location=where) from None
    if line_offset:
        for op in module.walk():
            if isinstance(op.location, FileLineColLoc):
                op.location = FileLineColLoc(
                    op.location.filename, IntAttr(op.location.line.data + line_offset), op.location.column
                )
    verify(module)
    return module


def verify(module: Operation) -> None:
    """Verify the module; a failure names the innermost failing op's location."""
    try:
        module.verify()
        return
    except (VerifyException, DiagnosticException) as outer:
        fallback = str(outer)
    # Find the innermost op that fails on its own, for the location and a short message.
    for op in module.walk(reverse=True):
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, DiagnosticException) as e:
            raise LoomError(f"'{op.name}' op {_short(str(e))}", op) from None
    raise LoomError(_short(fallback))


def _short(msg: str) -> str:
    """xDSL verifier messages may carry a printout of the module; keep the message."""
    lines = [ln for ln in msg.strip().splitlines() if ln.strip()]
    for ln in lines:
        if "Operation does not verify:" in ln:
            return ln.split("Operation does not verify:", 1)[1].strip(" |-")
    return lines[-1].strip(" |-^") if lines else msg
