"""What the frontend decomposes before import, shared by braze.export and
the torch.compile backend."""

from __future__ import annotations

import contextlib
import importlib
import threading

import torch


def without_attention(table):
    """`table` (a decomposition table) without the scaled-dot-product
    attention entries: attention stays one op, `braze.attention`, which runs
    fused (never writing the scores out). Decomposed, it would be matmuls
    and a softmax; and the CPU flash kernel's decomposition gives its output
    strides eager does not, which breaks a later view() (GPT-2, torch 2.13)."""
    for op in [op for op in table if "scaled_dot_product" in str(op)]:
        del table[op]
    return table


# torch.export's run_decompositions lists every CompositeImplicitAutograd op
# of every namespace twice per export (once to build the default table, once
# to split it), walking the whole dispatcher each time: about a second per
# export, most of a small model's capture. torch cannot cache the list because
# a custom op may be registered later; the list only changes when the
# dispatcher's registrations do, so braze keys it on a fingerprint of them.
_CIA_USERS = ("torch.export.exported_program", "torch.export.decomp_utils")
_cia_lock = threading.RLock()
_cia_cache: dict[tuple, frozenset] = {}


def _registry_fingerprint() -> tuple:
    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    return tuple(torch.ops._dir), len(registrations), hash(tuple(registrations))


@contextlib.contextmanager
def _cached_cia_ops():
    modules = [importlib.import_module(name) for name in _CIA_USERS]
    original = getattr(modules[0], "_collect_all_valid_cia_ops", None)
    if original is None or not all(hasattr(m, "_collect_all_valid_cia_ops") for m in modules):
        yield  # another torch: nothing to speed up
        return

    def collect():
        key = _registry_fingerprint()
        if key not in _cia_cache:
            _cia_cache.clear()
            _cia_cache[key] = frozenset(original())
        return set(_cia_cache[key])  # callers mutate what they get

    with _cia_lock:
        for module in modules:
            module._collect_all_valid_cia_ops = collect
        try:
            yield
        finally:
            for module in modules:
                module._collect_all_valid_cia_ops = original


def decompose_for_export(program):
    """`program` (a torch.export ExportedProgram) run through the core aten
    decompositions, attention kept whole (see without_attention)."""
    with _cached_cia_ops():
        return program.run_decompositions(without_attention(torch.export.default_decompositions()))
