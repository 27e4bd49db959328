"""BrazeError and the diagnostics it carries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

try:
    from mlir.ir import MLIRError as _ErrorBase
except ImportError:
    # A process that only runs AOT packages (braze.aot) has no MLIR; its
    # errors carry no MLIR diagnostics.
    _ErrorBase = Exception

if TYPE_CHECKING:
    from mlir import ir

_FILE_LINE_COL = re.compile(r'^loc\("(?P<file>(?:[^"\\]|\\.)*)":(?P<line>\d+):(?P<col>\d+)')


def format_location(location: ir.Location | str) -> str:
    """`loc("f.mlir":3:5)` as `f.mlir:3:5`; other locations as MLIR prints them."""
    text = str(location)
    match = _FILE_LINE_COL.match(text)
    if match:
        return f"{match['file']}:{match['line']}:{match['col']}"
    return text


@dataclass(frozen=True)
class Diagnostic:
    """One MLIR diagnostic, detached from the context that emitted it."""

    severity: str
    location: str
    message: str
    notes: tuple[Diagnostic, ...] = field(default=())

    @staticmethod
    def from_tuple(data) -> Diagnostic:
        """From braze._braze's (severity, location, message, notes) tuples."""
        severity, location, message, notes = data
        return Diagnostic(severity, format_location(location), message,
                          tuple(Diagnostic.from_tuple(n) for n in notes))

    @staticmethod
    def from_mlir(diagnostic) -> Diagnostic:
        """From an `ir.Diagnostic` (valid only inside a handler) or an `ir.DiagnosticInfo`."""
        severity = str(diagnostic.severity).rsplit(".", 1)[-1].lower()
        return Diagnostic(
            severity=severity,
            location=format_location(diagnostic.location),
            message=diagnostic.message,
            notes=tuple(Diagnostic.from_mlir(n) for n in diagnostic.notes),
        )

    def __str__(self) -> str:
        lines = [f"{self.location}: {self.severity}: {self.message}"]
        lines += [f"  {note}" for note in self.notes]
        return "\n".join(lines)


class BrazeError(_ErrorBase):
    """Raised for invalid IR, a failed pass or pipeline, or bad user input.

    `str()` gives the message followed by every diagnostic with its location;
    `diagnostics` holds them as `Diagnostic` records.
    """

    def __init__(self, message: str, diagnostics=()):
        self.diagnostics = tuple(
            d if isinstance(d, Diagnostic) else Diagnostic.from_mlir(d) for d in diagnostics
        )
        if _ErrorBase is Exception:
            super().__init__(message)
        else:
            super().__init__(message, list(self.diagnostics))
        self.message = message

    def __str__(self) -> str:
        return "\n".join([self.message, *map(str, self.diagnostics)])

    @staticmethod
    def from_mlir(message: str, error: ir.MLIRError) -> BrazeError:
        return BrazeError(message, error.error_diagnostics)


class CollectiveError(BrazeError):
    """A collective of a compiled program failed (a peer died, a timeout, a
    mismatch between ranks). It is always raised, never answered by running
    the graph again in eager PyTorch: the ranks have already diverged, and
    issuing the collectives again would pair them wrongly or hang."""
