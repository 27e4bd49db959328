"""What braze did, through Python's `logging` (see docs/observability.md).

Each topic has a logger, `braze.<topic>`, so an application routes braze's
records like any library's. `BRAZE_LOGS` (read when braze is imported) or
`set_logs` switch topics on, as TORCH_LOGS does: a comma-separated list of
topics, each at INFO, or at DEBUG when written `+topic`.

    BRAZE_LOGS=passes,+fusion python train.py
    braze.set_logs("codegen,+runtime")
"""

from __future__ import annotations

import logging
import os
import warnings

from braze.errors import BrazeError

# Each topic and what it reports.
TOPICS = {
    "passes": "each pass run: its time and the op count before and after",
    "fusion": "each fusion decision: fused, or refused and why (the passes' remarks)",
    "codegen": "kernels emitted per target, their source's path, cache hits and misses",
    "runtime": "each step of each call (DEBUG only)",
    "comm": "braze.comm's communicators: creation and failures",
}

ENVIRONMENT_VARIABLE = "BRAZE_LOGS"

_ROOT = logging.getLogger("braze")
# The handler set_logs adds when the application has configured none.
_stderr_handler: logging.Handler | None = None


def logger(topic: str) -> logging.Logger:
    """The logger of `topic` (one of TOPICS)."""
    if topic not in TOPICS:
        raise BrazeError(_unknown([topic]))
    return logging.getLogger(f"braze.{topic}")


def enabled(topic: str, level: int = logging.INFO) -> bool:
    """Whether `topic` logs at `level` (by BRAZE_LOGS, set_logs or the application's config)."""
    return logger(topic).isEnabledFor(level)


def _unknown(names: list[str]) -> str:
    listed = ", ".join(repr(n) for n in names)
    return (f"unknown log topic(s) {listed}; valid topics: {', '.join(TOPICS)} "
            f"(write '+topic' for debug level)")


def parse(spec: str) -> dict[str, int]:
    """`"passes,+fusion"` to {"passes": INFO, "fusion": DEBUG}; a BrazeError
    names unknown topics and lists the valid ones."""
    if not isinstance(spec, str):
        raise BrazeError(f"log topics must be a str such as 'passes,+fusion', got {type(spec).__name__}")
    levels, unknown = {}, []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        topic = item.lstrip("+")
        if topic not in TOPICS:
            unknown.append(item)
            continue
        levels[topic] = logging.DEBUG if item.startswith("+") else logging.INFO
    if unknown:
        raise BrazeError(_unknown(unknown))
    return levels


def set_logs(spec: str | None) -> None:
    """Logs the topics of `spec` ("passes,+fusion"; "" or None: none) and
    silences the others below WARNING. When the application has configured
    no logging handler, one that writes to stderr is added to the `braze`
    logger, so the records show (and removed again when no topic is left)."""
    global _stderr_handler
    levels = parse(spec or "")
    for topic in TOPICS:
        logging.getLogger(f"braze.{topic}").setLevel(levels.get(topic, logging.WARNING))
    if levels and _stderr_handler is None and not logging.getLogger().handlers and not _ROOT.handlers:
        _stderr_handler = logging.StreamHandler()
        _stderr_handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        _ROOT.addHandler(_stderr_handler)
    elif not levels and _stderr_handler is not None:
        _ROOT.removeHandler(_stderr_handler)
        _stderr_handler = None


def _from_environment() -> None:
    """Applies BRAZE_LOGS; a bad value is one warning, not a failed import."""
    spec = os.environ.get(ENVIRONMENT_VARIABLE)
    if spec is None:
        return
    try:
        set_logs(spec)
    except BrazeError as error:
        warnings.warn(f"{ENVIRONMENT_VARIABLE} ignored: {error}", stacklevel=3)
