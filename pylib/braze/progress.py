"""A progress bar for long compiles, on stderr when it is a terminal.

A compile names its stages up front and says when each begins; the bar
appears only once a compile has run for `DELAY` seconds (short compiles stay
silent), is redrawn in place with the elapsed time while a stage such as the
C++ build runs, and is erased when the compile ends. Nothing is written when
stderr is not a terminal, when TERM is "dumb", with BRAZE_PROGRESS=0, or
while a braze log topic is on (its lines would cut through the bar).
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import time
from contextlib import contextmanager

from braze import logs

ENVIRONMENT_VARIABLE = "BRAZE_PROGRESS"
# Seconds a compile runs before its bar appears, and between redraws.
DELAY = 0.5
INTERVAL = 0.1
_WIDTH = 20
_SPINNER = "|/-\\"

_current: contextvars.ContextVar = contextvars.ContextVar("braze_compile_progress", default=None)


class _Silent:
    def stage(self, name: str) -> None:
        pass


class Bar:
    """The bar of one compile: `stage(name)` moves it to that stage."""

    def __init__(self, title: str, stages: list[str], stream):
        self.title, self.stages, self.stream = title, stages, stream
        self.current = 0
        self.started = time.monotonic()
        self.drawn = False
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.ticker = threading.Thread(target=self._tick, name="braze-progress", daemon=True)
        self.ticker.start()

    def stage(self, name: str) -> None:
        with self.lock:
            self.current = self.stages.index(name)
            if self.drawn:
                self._draw()

    def line(self) -> str:
        filled = _WIDTH * self.current // len(self.stages)
        elapsed = time.monotonic() - self.started
        spin = _SPINNER[int(elapsed / INTERVAL) % len(_SPINNER)]
        return (f"braze: compiling {self.title} [{'#' * filled}{'.' * (_WIDTH - filled)}] "
                f"{self.current + 1}/{len(self.stages)} {self.stages[self.current]} {elapsed:5.1f}s {spin}")

    def _draw(self) -> None:
        self.stream.write("\r\x1b[K" + self.line())
        self.stream.flush()
        self.drawn = True

    def _tick(self) -> None:
        if self.done.wait(DELAY):
            return
        while True:
            with self.lock:
                if self.done.is_set():
                    return
                self._draw()
            if self.done.wait(INTERVAL):
                return

    def close(self) -> None:
        with self.lock:
            self.done.set()
            if self.drawn:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
        self.ticker.join()


def _wanted(stream) -> bool:
    if os.environ.get(ENVIRONMENT_VARIABLE, "1") == "0" or os.environ.get("TERM") == "dumb":
        return False
    if any(logs.enabled(topic) for topic in logs.TOPICS):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def compiling(title: str, stages: list[str]):
    """The progress of one compile: yields an object whose `stage(name)`
    (one of `stages`) says which stage runs now. Inside a compile that
    shows a bar already (braze.compile calls compile_mlir), that bar."""
    outer = _current.get()
    if outer is not None:
        yield outer
        return
    stream = sys.stderr
    bar = Bar(title, stages, stream) if _wanted(stream) else _Silent()
    token = _current.set(bar)
    try:
        yield bar
    finally:
        _current.reset(token)
        if isinstance(bar, Bar):
            bar.close()
