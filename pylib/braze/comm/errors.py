"""Exceptions of braze.comm. Every one names the op, its seq id and the ranks."""

from braze.errors import BrazeError


class CommError(RuntimeError):
    """Base of every communication error; `missing_ranks` lists the ranks that
    had not arrived (timeouts) or failed, where known."""

    def __init__(self, message, missing_ranks=()):
        super().__init__(message)
        self.missing_ranks = list(missing_ranks)


class CommInvalidArgument(CommError, ValueError):
    """Bad input caught before any memory is touched: rank out of range, wrong
    size or dtype, a window access past the end."""


class CommDeviceMismatch(CommInvalidArgument, BrazeError):
    """A tensor on a device its backend does not serve (a CUDA tensor given
    to shm, tcp, gloo or mpi; a host one given to nccl). Also a BrazeError,
    like braze's other refusals of bad input."""

    def __init__(self, message):
        super().__init__(message)  # CommError's: RuntimeError's init, not BrazeError's
        self.message, self.diagnostics = message, ()


class CommMismatch(CommError):
    """Ranks disagree on an op: different op, size, dtype, root or splits."""


class CommTimeout(CommError):
    """An op (or a rendezvous) ran past its timeout."""


class CommAborted(CommError):
    """The communicator was aborted; call `reconfigure` to continue."""


class CommRankFailed(CommError):
    """A peer died or closed its connection."""
