"""Weights of AOT packages: the safetensors file format, and `WeightStore`,
one copy of a model's weights that several loaded packages share and that
can be swapped for another checkpoint while they run.

A package's weights file is a safetensors file (https://huggingface.co/docs/
safetensors: an 8-byte little-endian header length, a JSON header giving each
tensor's dtype, shape and byte range, then the raw little-endian data) with
one tensor per `braze.parameter` of the program, named as the parameter,
and the header metadata `{"format": "braze-aot-weights", "braze": version}`.
Any safetensors file with the right names, shapes and dtypes is accepted,
e.g. another checkpoint of the same model.

A store holds an immutable snapshot: a dict of name -> tensor. `swap`
builds a new snapshot and publishes it with one reference assignment; a
loaded program reads the snapshot once at the start of each call, so a call
sees the old weights or the new ones, never a mix.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Mapping

import torch

from braze.errors import BrazeError
from braze.hostops.dtypes import mlir_name

WEIGHTS_FORMAT = "braze-aot-weights"


def _safetensors():
    try:
        import safetensors.torch
    except ImportError:
        raise BrazeError("braze.aot needs the safetensors package for weights files: "
                         "pip install safetensors (or braze[aot])") from None
    return safetensors.torch


def write_weights(path: Path, tensors: Mapping[str, torch.Tensor], braze_version: str) -> None:
    """Writes `tensors` (CPU copies, contiguous) as a safetensors file."""
    _safetensors().save_file({name: t.detach().to("cpu").contiguous() for name, t in tensors.items()},
                             str(path), metadata={"format": WEIGHTS_FORMAT, "braze": braze_version})


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; a BrazeError for a file that is
    not one (missing, truncated, corrupted header)."""
    path = Path(path)
    if not path.is_file():
        raise BrazeError(f"weights file {path} does not exist")
    try:
        return _safetensors().load_file(str(path))
    except Exception as error:  # safetensors raises its own error types
        raise BrazeError(f"weights file {path} is not a valid safetensors file: {error}") from None


def describe(tensor: torch.Tensor) -> str:
    return f"{mlir_name(tensor.dtype)}{list(tensor.shape)}"


def check_parameters(expected: Mapping[str, tuple[list[int], torch.dtype]], tensors: Mapping[str, torch.Tensor],
                     where: str, owner: str = "the package") -> None:
    """Every expected parameter is in `tensors` with its shape and dtype; a
    BrazeError listing what does not match otherwise (`where` names the
    weights, `owner` whose parameters they must match)."""
    problems = []
    for name, (shape, dtype) in expected.items():
        tensor = tensors.get(name)
        if tensor is None:
            problems.append(f"{name} is missing")
        elif list(tensor.shape) != list(shape) or tensor.dtype != dtype:
            problems.append(f"{name} is {describe(tensor)}, {owner} expects {mlir_name(dtype)}{list(shape)}")
    if problems:
        raise BrazeError(f"{where} do not match {owner}'s parameters: " + "; ".join(problems))


class WeightStore:
    """One copy of a model's weights, shared by the packages loaded with
    `braze.aot.load(path, weights=store)`.

    `WeightStore(state_dict)` takes a model's tensors (CPU copies, made
    contiguous; the caller's tensors are not kept), `WeightStore.load(path)`
    a package's weights file. `swap(state_dict)` replaces every tensor with
    another checkpoint's of the same names, shapes and dtypes, safely while
    other threads call packages that use the store (see the module's
    description).
    """

    def __init__(self, state_dict: Mapping[str, torch.Tensor]):
        self._snapshot = self._own(state_dict)
        self._swap_lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path) -> WeightStore:
        store = cls.__new__(cls)
        store._snapshot = read_weights(path)
        store._swap_lock = threading.Lock()
        return store

    @staticmethod
    def _own(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        owned = {}
        for name, value in state_dict.items():
            if not isinstance(value, torch.Tensor):
                raise BrazeError(f"weight {name!r} is a {type(value).__name__}, not a tensor")
            owned[name] = value.detach().to("cpu", copy=True).contiguous()
        return owned

    @property
    def snapshot(self) -> dict[str, torch.Tensor]:
        """The current weights (do not modify: a new snapshot replaces it)."""
        return self._snapshot

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._snapshot[name]

    def __contains__(self, name: str) -> bool:
        return name in self._snapshot

    def __len__(self) -> int:
        return len(self._snapshot)

    def names(self) -> list[str]:
        return list(self._snapshot)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._snapshot.values())

    def swap(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Replaces the weights by `state_dict`'s: the same names, shapes and
        dtypes (a BrazeError naming each mismatch otherwise). Calls already
        running finish on the old weights; calls starting after this returns
        use the new ones."""
        with self._swap_lock:
            current = self._snapshot
            extra = sorted(set(state_dict) - set(current))
            if extra:
                raise BrazeError(f"swap: the store has no weight(s) {', '.join(extra)}")
            check_parameters({name: (list(t.shape), t.dtype) for name, t in current.items()},
                             state_dict, "swap: the new weights", "the store")
            self._snapshot = self._own(state_dict)
