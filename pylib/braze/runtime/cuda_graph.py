"""Replays a compiled program as one CUDA graph (the compile option
`cuda_graph`; targets `cuda` and `triton` on a CUDA device).

A program of many small kernels spends most of a call launching them; a
CUDA graph records every launch of one call (kernels, the vendor GEMMs,
torch's host-op kernels, the allocations of their results) and replays
them with one launch. What that asks of the program, checked when it is
compiled: static shapes (a graph's launches are fixed), no control flow
(its predicates are read on the host) and no collectives (braze.comm
issues them and tracks their completion from the host, nccl included).

A call:
1. the first runs the steps as usual, on a side stream (CUDA's advice
   before capturing: lazily created handles, the autotuner's timing runs
   and loaded modules all happen outside the capture), and notes where
   each argument lives;
2. the second captures the steps into the graph, then replays it. An
   argument that lives where it did on the first call is read in place (a
   weight, a KV cache: not copied per call); any other is copied into a
   buffer the graph reads;
3. every later call copies the moving arguments into their buffers,
   replays, and returns copies of the results (the graph overwrites its
   own results on the next replay). An argument read in place that now
   lives elsewhere is captured again, copied from then on.

A kernel that can fail (integer division by zero) cannot read its failure
flag back inside a capture: the flags are collected while capturing
(`GraphCapture`) and read once after each replay, which then
raises like an ordinary call, naming the kernel.

`graphs` is the CUDA graph API (`TorchCudaGraphs`, torch.cuda's); tests
without a GPU give a stand-in that replays by running the steps again.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import torch

from braze import logs
from braze.errors import BrazeError
from braze.hostops.control_flow import CONTROL_FLOW_OPS
from braze.hostops.record import TensorType
from braze.runtime import collectives

_RUNTIME_LOG = logs.logger("runtime")


class GraphCapture:
    """What capturing a program as a CUDA graph asks of its device
    kernels, active while the module's `capture` is this object:

    * a kernel that can fail cannot read its failure flag inside a capture
      (reading waits for the stream): `failure` collects the flag, which
      `check_failures` reads after every replay;
    * a kernel's `sizes` array goes to the device by a copy that waits for
      the host, which a capture cannot hold either: `device_sizes` keeps
      each array's device copy from the warm-up, and the capture, whose
      arguments have the warm-up's shapes and strides, finds it there."""

    def __init__(self):
        self.capturing_now = False
        self.flags: list[tuple[torch.Tensor, str]] = []
        self.sizes: dict[bytes, torch.Tensor] = {}

    @contextmanager
    def warming_up(self):
        global capture
        capture = self
        try:
            yield
        finally:
            capture = None

    @contextmanager
    def capturing(self):
        global capture
        capture, self.capturing_now, self.flags = self, True, []
        try:
            yield
        finally:
            capture, self.capturing_now = None, False

    def failure(self, flag: torch.Tensor, culprit: str) -> int:
        if not self.capturing_now:
            return int(flag.item())
        self.flags.append((flag, culprit))
        return 0

    def device_sizes(self, sizes, to_device) -> torch.Tensor:
        key = bytes(sizes)
        if key not in self.sizes:
            if self.capturing_now:
                raise BrazeError("a kernel's sizes changed between the warm-up and the capture of a CUDA graph")
            self.sizes[key] = to_device(sizes)
        return self.sizes[key]

    def check_failures(self) -> None:
        """After a replay: raises for the first kernel whose flag is set."""
        if self.flags and bool(torch.stack([flag for flag, _ in self.flags]).any()):
            culprit = next(c for flag, c in self.flags if int(flag.item()))
            raise BrazeError(f"{culprit}: integer division by zero")


# The warm-up or capture under way, or None.
capture: GraphCapture | None = None


def failure_flag(flag: torch.Tensor, culprit) -> int:
    """A device kernel's failure flag (a tensor on the device; reading it
    waits for the stream), or 0 while a CUDA graph captures it (read after
    each replay); `culprit()` names the kernel."""
    if capture is not None:
        return capture.failure(flag, culprit())
    return int(flag.item())



class TorchCudaGraphs:
    """torch.cuda's graphs: a side stream for the warm-up, a capture with
    its own memory pool, a replay."""

    device_type = "cuda"  # where its graphs run

    def warm_up(self, run):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            outputs = run()
        torch.cuda.current_stream().wait_stream(side)
        return outputs

    def capture(self, run):
        """(the graph, what `run` returned while captured)."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = run()
        return graph, outputs

    def replay(self, graph) -> None:
        graph.replay()


def refusal(program, op_names, device_type: str = "cuda") -> str | None:
    """Why `program` (with ops named `op_names`) cannot be a graph on
    `device_type`, or None."""
    if program.device.type != device_type:
        return f"it runs on {program.device} (a {device_type.upper()} device is needed)"
    for number, type_ in enumerate(program.argument_types):
        if not isinstance(type_, TensorType):
            return f"argument #{number} is not a tensor ({type_})"
        if None in type_.shape:
            return f"argument #{number} has a dynamic shape ({type_}): a graph replays fixed launches"
    for name in op_names:
        if name in CONTROL_FLOW_OPS:
            return f"it has control flow ({name}), whose predicate is read on the host"
        if name in collectives.OPS:
            return f"it has a collective ({name}), which braze.comm issues and tracks from the host"
    return None


class GraphedProgram:
    """`program` (an `executor.Program`) replayed as a CUDA graph; called
    like it."""

    def __init__(self, program, op_names, graphs=None):
        self.graphs = graphs or TorchCudaGraphs()
        why = refusal(program, op_names, self.graphs.device_type)
        if why is not None:
            raise BrazeError(f"the cuda_graph option cannot replay {program.name}: {why}")
        self.program = program
        self.calls = 0
        self.first_places: list[tuple] = []  # per argument: where it lived on the first call
        self.in_place: list[bool] = []
        self.buffers: list = []  # per argument: its graph buffer, or None (read in place)
        self.read_from: list[tuple] = []  # per argument: where the graph reads it
        self.graph = None
        self.results: list = []
        self.capture = GraphCapture()
        self.captures = 0  # how many graphs were captured (a moved in-place argument adds one)

    def __call__(self, *arguments):
        arguments, as_numpy = self.program.checked(arguments)
        self.calls += 1
        if self.calls == 1:
            self.first_places = [_place(a) for a in arguments]
            with self.capture.warming_up():
                return self.program.returned(self.graphs.warm_up(lambda: self.program.run(arguments)), as_numpy)
        if self.graph is None:
            self._capture(arguments, [_place(a) == p for a, p in zip(arguments, self.first_places)])
        else:
            moved = [i for i, (a, buffer) in enumerate(zip(arguments, self.buffers))
                     if buffer is None and _place(a) != self.read_from[i]]
            if moved:
                _RUNTIME_LOG.debug("%s: argument(s) %s moved; capturing the graph again, copying them",
                                   self.program.name, moved)
                self._capture(arguments, [flag and i not in moved for i, flag in enumerate(self.in_place)])
        for argument, buffer in zip(arguments, self.buffers):
            if buffer is not None:
                buffer.copy_(argument)
        self.graphs.replay(self.graph)
        self.capture.check_failures()
        return self.program.returned([r.clone() if isinstance(r, torch.Tensor) else r for r in self.results],
                                     as_numpy)

    def _capture(self, arguments, in_place: list[bool]) -> None:
        """Captures the steps reading the arguments `in_place` says where
        they are and the others from graph buffers (the same strides, so
        every kernel's sizes are the warm-up's)."""
        self.in_place = in_place
        self.buffers = [None if keep else torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                        for a, keep in zip(arguments, in_place)]
        self.read_from = [_place(a) for a in arguments]
        read = [a if buffer is None else buffer for a, buffer in zip(arguments, self.buffers)]
        try:
            with self.capture.capturing():
                self.graph, self.results = self.graphs.capture(lambda: self.program.run(read))
        except BrazeError:
            raise
        except Exception as error:  # CUDA's capture errors come as RuntimeError and others
            raise BrazeError(f"the cuda_graph option could not capture {self.program.name}: {error}") from None
        self.captures += 1
        if _RUNTIME_LOG.isEnabledFor(logging.DEBUG):
            _RUNTIME_LOG.debug("%s: captured as a CUDA graph (%d argument(s) read in place, %d copied per call)",
                               self.program.name, sum(in_place), len(in_place) - sum(in_place))


def _place(tensor: torch.Tensor) -> tuple:
    """Where a graph reads `tensor`: its address and strides."""
    return tensor.data_ptr(), tensor.stride()
