"""The registry that lets a Python pass be named in a pipeline string."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Callable

from mlir import ir, passmanager

from braze._native import new_context
from braze.errors import BrazeError

_PASS_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class PythonPass:
    """A registered Python pass: `run(operation, **options)` on the module op."""

    name: str
    run: Callable[..., None]
    description: str

    def option_names(self) -> set[str] | None:
        """The keyword options `run` accepts; None when it takes **kwargs."""
        parameters = list(inspect.signature(self.run).parameters.values())[1:]
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            return None
        return {p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


_passes: dict[str, PythonPass] = {}


def _is_native_pass(name: str) -> bool:
    try:
        passmanager.PassManager.parse(f"builtin.module({name})", context=new_context())
    except ValueError:
        return False
    return True


def register_pass(name: str, *, description: str = ""):
    """Decorator: makes `fn(operation, **options)` runnable as `name` in a pipeline.

    The function receives the module's `mlir.ir.Operation` and edits it in
    place; options written `name{key=value}` arrive as string keyword
    arguments. Registering a name again replaces the earlier pass; a name that
    a C++ pass already uses is refused.
    """
    if not isinstance(name, str) or not _PASS_NAME.match(name):
        raise BrazeError(
            f"invalid pass name {name!r}: use letters, digits, '-', '_' and '.', "
            "starting with a letter"
        )
    if _is_native_pass(name):
        raise BrazeError(f"cannot register Python pass '{name}': a C++ pass has that name")

    def decorate(fn: Callable[..., None]) -> Callable[..., None]:
        if not callable(fn):
            raise BrazeError(f"pass '{name}' must be a callable, got {type(fn).__name__}")
        doc = description or (inspect.getdoc(fn) or "").split("\n", 1)[0]
        _passes[name] = PythonPass(name, fn, doc)
        return fn

    return decorate


def lookup(name: str) -> PythonPass | None:
    return _passes.get(name)


def registered_passes() -> dict[str, PythonPass]:
    """A snapshot of the registered Python passes by name."""
    return dict(_passes)
