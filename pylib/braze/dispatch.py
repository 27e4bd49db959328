"""A dispatch table filled by a decorator: the frontend's lowerings and the
reference interpreter's handlers are both looked up this way."""

from __future__ import annotations

from typing import Callable


class DispatchTable(dict):
    """Maps keys (op names or call targets) to functions; one function per key."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, *keys) -> Callable[[Callable], Callable]:
        """Decorator: the function handles every key in `keys`."""

        def decorate(fn: Callable) -> Callable:
            for key in keys:
                if key in self:
                    raise RuntimeError(f"two {self.what} for {key}")
                self[key] = fn
            return fn

        return decorate
