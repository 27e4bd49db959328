"""The machine that cost estimates assume: one device's memory bandwidth and
peak arithmetic rate, and each rank's link to the others; and the host
CPU's instruction-set flags and L2 cache size.

It sits below every stage that estimates time: the passes (braze-overlap's
cost mode takes its numbers as options), the target options that validate
`overlap_machine`, and the report (`report_machine`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from pathlib import Path

from braze.errors import BrazeError


@functools.lru_cache(maxsize=None)
@functools.cache
def cpu_flags() -> frozenset[str]:
    """This CPU's flags from /proc/cpuinfo (read once; empty where there is none): the
    extensions -march=native builds generated code for."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


@functools.cache
def l2_cache_bytes(caches: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """One core's L2 cache in bytes, from sysfs (`caches`: the first CPU's
    cache directories; read once; 1 MiB where the system does not say)."""
    for index in sorted(caches.glob("index*")):
        try:
            if (index / "level").read_text().strip() != "2":
                continue
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
        digits = size[:-1] if scale != 1 else size
        if digits.isdigit():
            return int(digits) * scale
    return 1 << 20


@dataclass(frozen=True)
class Machine:
    """What the estimates assume (the compile option `report_machine`
    overrides any of them): one device's memory bandwidth and peak
    arithmetic rate, and each rank's link to the others."""

    memory_bandwidth: float = 100e9  # bytes per second
    peak_flops: float = 1e12  # flops per second
    link_bandwidth: float = 12.5e9  # bytes per second (100 Gbit/s)
    link_latency: float = 10e-6  # seconds per collective

    @classmethod
    def from_option(cls, given: dict | None, option: str = "report_machine") -> "Machine":
        """The machine of the compile option `option` (`report_machine`,
        `overlap_machine`): a dict of some of the fields above (positive
        numbers)."""
        if given is None:
            return cls()
        names = [f.name for f in fields(cls)]
        if not isinstance(given, dict):
            raise BrazeError(f"the {option} option must be a dict with some of {', '.join(names)}, "
                             f"got {type(given).__name__}")
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise BrazeError(f"{option} has no field(s) {', '.join(map(repr, unknown))} "
                             f"(fields: {', '.join(names)})")
        for name, value in given.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise BrazeError(f"{option}[{name!r}] must be a positive number, got {value!r}")
        return cls(**{name: float(value) for name, value in given.items()})

    def overlap_options(self) -> str:
        """braze-overlap's options for this machine (its cost mode; the
        pass's defaults are this class's)."""
        return (f"link-bandwidth={self.link_bandwidth!r} link-latency={self.link_latency!r} "
                f"memory-bandwidth={self.memory_bandwidth!r} peak-flops={self.peak_flops!r}")

    def compute_seconds(self, bytes_: int, flops: int) -> float:
        return max(bytes_ / self.memory_bandwidth, flops / self.peak_flops)

    def link_seconds(self, bytes_: int) -> float:
        return self.link_latency + bytes_ / self.link_bandwidth
