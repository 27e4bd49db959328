"""What the frontend decomposes before import, shared by braze.export and
the torch.compile backend."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
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


# run_decompositions then patches each of those ops for the length of the
# export (Python kernels for its autograd, backend and CompositeImplicitAutograd
# keys, a fake-tensor rule) and undoes it afterwards: about 60 ms of each
# export, most of it Python evaluating the annotations of a nested function
# in torch's py_impl, ~5700 times. The patch depends only on the decomposition
# callables and on each op's kernels before it, so braze lets torch's context
# manager patch once, records the kernels it left, and afterwards replays them
# on ops whose kernels are still what they were then, unpatching the way torch
# does. Anything else (a new table, an op changed in between) goes to torch's
# own context manager, and is recorded again.
_OVERRIDE_USER = "torch.export.exported_program"
_FAKE_RULES = "torch._subclasses.fake_impls"


@dataclasses.dataclass
class _RecordedOverride:
    decompositions: tuple  # the callables, in the ops' order
    before: dict  # op -> its Python kernels before the patch
    during: dict  # op -> its Python kernels under the patch
    fake_rules_before: dict  # op -> its fake-tensor rule before the patch (None: none)
    fake_rules: dict  # op -> its fake-tensor rule under the patch


_recorded: dict[tuple, _RecordedOverride] = {}


def _same_callable(a, b) -> bool:
    """Whether a and b do the same: the same object, or partials of one
    closure-free function's code with equal arguments (torch makes a new one
    per export for every op it decomposes)."""
    if a is b:
        return True
    return (isinstance(a, functools.partial) and isinstance(b, functools.partial)
            and getattr(a.func, "__code__", None) is getattr(b.func, "__code__", False)
            and a.func.__closure__ is None and b.func.__closure__ is None
            and a.args == b.args and a.keywords.keys() == b.keywords.keys()
            and all(v is b.keywords[k] for k, v in a.keywords.items()))


def _same_kernels(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


def _replaying_override(original, fake_rules):
    @contextlib.contextmanager
    def override(cia_to_decomp):
        ops = tuple(cia_to_decomp)
        rules = fake_rules.op_implementations_dict
        record = _recorded.get(ops)
        if record is None or not (
                all(_same_callable(a, b) for a, b in zip(record.decompositions, cia_to_decomp.values()))
                and all(_same_kernels(op.py_kernels, record.before[op]) for op in ops)
                and all(rules.get(op) is record.fake_rules_before[op] for op in ops)):
            before = {op: dict(op.py_kernels) for op in ops}
            fake_rules_before = {op: rules.get(op) for op in ops}
            with original(cia_to_decomp):
                _recorded.clear()
                _recorded[ops] = _RecordedOverride(
                    tuple(cia_to_decomp.values()), before, {op: dict(op.py_kernels) for op in ops},
                    fake_rules_before, {op: rules[op] for op in ops if op in rules})
                yield
            return
        for op in ops:
            op.py_kernels.clear()
            op.py_kernels.update(record.during[op])
            op._dispatch_cache.clear()
        rules.update(record.fake_rules)
        try:
            yield
        finally:
            for op in ops:
                op.py_kernels.clear()
                op.py_kernels.update(record.before[op])
                op._dispatch_cache.clear()
                fake_rules._deregister_op_impl(op)

    return override


@contextlib.contextmanager
def _faster_decompositions():
    """torch's list of composite ops cached, and its patch of them replayed,
    for the length of one decomposition (torch itself is unpatched outside)."""
    modules = [importlib.import_module(name) for name in _CIA_USERS]
    original = getattr(modules[0], "_collect_all_valid_cia_ops", None)
    override_user = importlib.import_module(_OVERRIDE_USER)
    original_override = getattr(override_user, "_override_composite_implicit_decomp", None)
    fake_rules = importlib.import_module(_FAKE_RULES)
    if (original is None or not all(hasattr(m, "_collect_all_valid_cia_ops") for m in modules)
            or original_override is None or not hasattr(fake_rules, "op_implementations_dict")
            or not hasattr(fake_rules, "_deregister_op_impl")):
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
        override_user._override_composite_implicit_decomp = _replaying_override(original_override, fake_rules)
        try:
            yield
        finally:
            for module in modules:
                module._collect_all_valid_cia_ops = original
            override_user._override_composite_implicit_decomp = original_override


def decompose_for_export(program):
    """`program` (a torch.export ExportedProgram) run through the core aten
    decompositions, attention kept whole (see without_attention)."""
    with _faster_decompositions():
        return program.run_decompositions(without_attention(torch.export.default_decompositions()))
