"""A built `Program` as JSON, and back: the program part of an AOT package.

A program (braze.runtime.executor) is, once built, plain data: slot numbers,
shapes, dtypes, argument checks, symbolic dims, the op records of its host
steps, and the names of the native functions its kernel steps call. What is
not data is derived from data: a host step's prepared handler from its
`OpRecord` (braze.hostops, which needs no MLIR), a kernel's function from
the package's library by name. So a program is written as the state of its
objects, field by field, and read back by making the same objects and
deriving the rest; nothing is pickled, and a reader only makes objects of
braze's own runtime classes (`_ALLOWED_MODULES`).

Encoding of a value (`encode`): None, bool, int, float and str as
themselves; a list as a JSON array; everything else as a one-key object
naming its kind: `tuple`, `set`, `dict` (a list of [key, value] pairs: keys need
not be strings), `counter`, `dtype`, `device`, `memory_format`,
`native_function` (a symbol of the package's library), `c_array` and
`c_array_type` (ctypes int64 and pointer arrays), `array` (a Python
array.array), `methodcaller`, and
`object` (`{"class": "module:qualname", "state": {field: value}}`). A value
of another kind cannot be written: a BrazeError names its field.
"""

from __future__ import annotations

import array
import collections
import ctypes
import importlib
import operator
from typing import Any, Callable

import torch

from braze.errors import BrazeError
from braze.hostops import HOST_OPS, HostContext, prepare_record
from braze.hostops.extern import prepare_extern
from braze.runtime.executor import KernelCall
from braze.runtime.memory import result_allocator

# Modules whose classes a program may hold; each loads without MLIR.
_ALLOWED_MODULES = ("braze.runtime.", "braze.hostops.", "braze.symbolic")
_C_TYPES = {t.__name__: t for t in (ctypes.c_int64, ctypes.c_void_p)}


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _prepared_fields(value) -> tuple[str, ...]:
    """A step's fields that `Reader` derives again (so not written): a host
    step's prepared handler (`run`, or `call` for an extern) from its op
    record. A convolution's weight in its memory format, or prepacked for
    oneDNN, is not kept either: the loaded step converts the weight per
    call, because the loaded weights may be swapped (braze.aot.WeightStore)."""
    # A CPU kernel or combo call's launcher (braze.runtime.launch) is made
    # again on its first call.
    launcher = ("native",) if "native" in vars(value) else ()
    if isinstance(value, KernelCall):
        # The kernel's analysis (MLIR types) serves GPU launchers, which
        # packages do not hold (CPU only); a CPU kernel call has what it
        # needs in its other fields.
        return ("spec", *launcher)
    if launcher:
        return launcher
    if not hasattr(value, "record"):
        return ()
    return tuple(name for name in ("run", "call", "weight", "prepacked") if name in vars(value))


class Writer:
    """Encodes a program's objects. A tensor is not among them: a program's
    tensors (its template) are written apart, as weights and constants.
    `kernels_runtime` (the program's native library) is written as a
    reference: the regions of a braze.switch or braze.while share it."""

    def __init__(self, kernels_runtime=None):
        self.kernels_runtime = kernels_runtime

    def encode(self, value, where: str = "program") -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if value is self.kernels_runtime:
            return {"kernels_runtime": None}
        if isinstance(value, list):
            return [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, tuple):
            return {"tuple": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        if isinstance(value, (set, frozenset)):
            return {"set": [self.encode(v, where) for v in value]}
        if isinstance(value, collections.Counter):
            return {"counter": [[self.encode(k, where), v] for k, v in value.items()]}
        if isinstance(value, dict):
            return {"dict": [[self.encode(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in value.items()]}
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.memory_format):
            return {"memory_format": str(value).removeprefix("torch.")}
        if isinstance(value, operator.methodcaller):
            _, (name, *arguments) = value.__reduce__()
            return {"methodcaller": [name, self.encode(list(arguments), where)]}
        if isinstance(value, ctypes._CFuncPtr):
            return {"native_function": value.__name__}
        if isinstance(value, array.array):
            return {"array": [value.typecode, value.tolist()]}
        if isinstance(value, ctypes.Array):
            return {"c_array": [value._type_.__name__, list(value)]}
        if isinstance(value, type) and issubclass(value, ctypes.Array):
            return {"c_array_type": [value._type_.__name__, value._length_]}
        if isinstance(value, HostContext):
            # Parameters are evaluated when a program is built: a step's
            # context only says where new tensors go.
            return {"host_context": str(value.device)}
        cls = type(value)
        if cls.__module__.startswith(_ALLOWED_MODULES) and hasattr(value, "__dict__"):
            skipped = _prepared_fields(value)
            if "run" in skipped and getattr(HOST_OPS.get(value.record.name), "prepare", None) is None:
                raise BrazeError(f"an AOT package cannot hold '{value.record.name}' (at {value.record.location}): "
                                 f"its host-op handler reads the MLIR op, not its record (see braze.hostops.table)")
            state = {name: self.encode(field, f"{where}.{name}")
                     for name, field in vars(value).items() if name not in skipped}
            return {"object": {"class": _class_name(cls), "skipped": list(skipped), "state": state}}
        raise BrazeError(f"an AOT package cannot hold {where} (a {cls.__module__}.{cls.__qualname__}): "
                         f"it is not plain data or one of braze's runtime objects")


class Reader:
    """Decodes what `Writer` wrote; `function(name)` gives a native function
    of the package's library, `kernels_runtime` the library's step factory."""

    def __init__(self, function: Callable[[str], Any], kernels_runtime=None):
        self.function = function
        self.kernels_runtime = kernels_runtime

    def decode(self, data) -> Any:
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        if isinstance(data, list):
            return [self.decode(v) for v in data]
        ((kind, body),) = data.items()
        if kind == "tuple":
            return tuple(self.decode(v) for v in body)
        if kind == "set":
            return {self.decode(v) for v in body}
        if kind == "counter":
            return collections.Counter({self.decode(k): v for k, v in body})
        if kind == "dict":
            return {self.decode(k): self.decode(v) for k, v in body}
        if kind == "dtype":
            return getattr(torch, body)
        if kind == "device":
            return torch.device(body)
        if kind == "memory_format":
            return getattr(torch, body)
        if kind == "methodcaller":
            name, arguments = body
            return operator.methodcaller(name, *self.decode(arguments))
        if kind == "native_function":
            return self.function(body)
        if kind == "array":
            typecode, values = body
            return array.array(typecode, values)
        if kind == "c_array":
            type_name, values = body
            return (_C_TYPES[type_name] * len(values))(*values)
        if kind == "c_array_type":
            type_name, length = body
            return _C_TYPES[type_name] * length
        if kind == "kernels_runtime":
            return self.kernels_runtime
        if kind == "host_context":
            return HostContext(None, body, result_allocator(body))
        if kind == "object":
            return self._object(body)
        raise BrazeError(f"the package's program holds a value of unknown kind {kind!r}")

    def _object(self, body: dict):
        module_name, qualname = body["class"].split(":")
        if not module_name.startswith(_ALLOWED_MODULES):
            raise BrazeError(f"the package's program names class {body['class']}, which is not braze's runtime")
        try:
            cls = importlib.import_module(module_name)
            for part in qualname.split("."):
                cls = getattr(cls, part)
        except (ImportError, AttributeError):
            raise BrazeError(f"the package's program names class {body['class']}, which this braze lacks") from None
        value = cls.__new__(cls)
        value.__dict__.update({name: self.decode(field) for name, field in body["state"].items()})
        skipped = body["skipped"]
        if "call" in skipped:
            value.call = prepare_extern(value.record)
        if "run" in skipped:
            value.run = prepare_record(value.record)
            if value.run is None:
                raise BrazeError(f"'{value.record.name}' has no prepared host-op handler in this braze")
        for converted in ("weight", "prepacked"):
            if converted in skipped:
                setattr(value, converted, None)
        return value
