"""Machine description and a measure of other work competing for the CPUs,
shared by benchmarks/cpu/run.py and benchmarks/cpu/gemm_blas.py."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_info() -> dict:
    cpu, flags, family, model = platform.processor(), [], None, None
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n")[0]
        info = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in first.splitlines() if ":" in line)}
        cpu = info.get("model name", cpu)
        flags = info.get("flags", "").split()
        family, model = info.get("cpu family"), info.get("model")
    except OSError:
        pass
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "amx_tile") if f in flags]
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            mem_gb = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu_model": cpu,
        "cpu_family_model": f"{family}/{model}",
        "cpu_isa": isa,
        "logical_cpus": os.cpu_count(),
        "hypervisor": "hypervisor" in flags,
        "memory_gb": mem_gb,
    }


def machine_info(torch) -> dict:
    try:
        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except Exception:  # noqa: BLE001
        commit, dirty = "", False
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        **cpu_info(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_mkl": torch.backends.mkl.is_available(),
        "torch_mkldnn": torch.backends.mkldnn.is_available(),
        "torch_threads": torch.get_num_threads(),
        "git_commit": commit + ("+dirty" if dirty else ""),
        "loadavg_start": list(os.getloadavg()),
    }


def _proc_stat():
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
    busy = v[0] + v[1] + v[2] + v[5] + v[6]
    steal = v[7] if len(v) > 7 else 0
    return busy, steal


class CpuLoad:
    """CPU time that other processes (and the hypervisor: steal) took while
    a measurement ran, as a percentage of all logical CPUs.

    other = busy CPU time of the whole machine minus this process's own (and
    its reaped children's) CPU time. Children not yet reaped (e.g. compile
    workers still alive) count as other."""

    def __init__(self):
        self.hz = os.sysconf("SC_CLK_TCK")
        self.ncpu = os.cpu_count() or 1
        self.t0 = time.perf_counter()
        self.s0 = _proc_stat()
        self.own0 = self._own()

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def result(self) -> dict:
        s1 = _proc_stat()
        wall = time.perf_counter() - self.t0
        own = self._own() - self.own0
        if not self.s0 or not s1 or wall <= 0:
            return {}
        busy = (s1[0] - self.s0[0]) / self.hz
        steal = (s1[1] - self.s0[1]) / self.hz
        cap = wall * self.ncpu
        return {
            "wall_s": round(wall, 3),
            "own_cpu_pct": round(100 * own / cap, 1),
            "other_cpu_pct": round(max(0.0, 100 * (busy - own) / cap), 1),
            "steal_pct": round(100 * steal / cap, 1),
        }


def wait_quiet(max_s: float, threshold_pct: float = 10.0, window_s: float = 5.0) -> dict:
    """Waits (up to max_s seconds) until other processes take less than
    threshold_pct of the CPUs over a window_s window; returns what it saw."""
    start = time.perf_counter()
    last = {}
    while True:
        load = CpuLoad()
        time.sleep(window_s)
        last = load.result()
        waited = time.perf_counter() - start
        if last.get("other_cpu_pct", 0.0) < threshold_pct or waited >= max_s:
            return {"waited_s": round(waited, 1), "quiet": last.get("other_cpu_pct", 0.0) < threshold_pct,
                    "threshold_pct": threshold_pct, "last_window": last}
