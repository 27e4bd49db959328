#!/usr/bin/env python3
"""GEMM throughput of the BLAS libraries braze could call, on the GEMM shapes
of the CPU benchmark's mlp and block models (benchmarks/cpu/models.py).

    .venv/bin/python benchmarks/cpu/gemm_blas.py [--runs N] [--json PATH] [--md PATH]

float32, 2 threads, median of N timed calls after warm-up; each library is
timed in contiguous blocks (3 rounds), with a pause between libraries so that
one library's spinning thread pool does not slow the next. Libraries:

  torch       torch.mm / torch.bmm with out= (ATen's CPU GEMM: MKL in the
              torch wheel)
  mkl         MKL called directly through ctypes from torch's libtorch_cpu.so:
              Fortran sgemm_ (column-major, so C^T = B^T A^T is computed);
              batched shapes: cblas_sgemm_batch (one group)
  numpy       numpy.matmul with out= (numpy's bundled scipy-openblas64)
  openblas32  the scipy-openblas32 wheel through ctypes: scipy_cblas_sgemm
              (row-major); batched shapes: scipy_cblas_sgemm_batch_strided

Batched shapes get a second row where mkl and openblas32 are called once per
matrix from a Python loop (ctypes arguments prepared in advance), as a code
generator that loops over single GEMMs would.

Layout: "nn" multiplies A [M, K] by B [K, N], both row-major; "nt" multiplies
A by W^T with W [N, K] row-major, as nn.Linear stores its weight (and as
q @ k^T reads k). Every row is checked against torch in float64.

Writes benchmarks/cpu/gemm_blas.json and prints a markdown section (also
written to benchmarks/cpu/GEMM_BLAS_section.md).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import glob
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time

THREADS = 2
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))  # before numpy loads its OpenBLAS
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from machine import CpuLoad, cpu_info, wait_quiet  # noqa: E402

# (name, batch, M, K, N, layout): the GEMMs of models.MLP and models.PreNormBlock.
SHAPES = [
    ("mlp fc1 (x @ W1^T)", 1, 256, 1024, 4096, "nt"),
    ("mlp fc2 (h @ W2^T)", 1, 256, 4096, 1024, "nt"),
    ("block qkv", 1, 1024, 512, 1536, "nt"),
    ("block attn proj", 1, 1024, 512, 512, "nt"),
    ("block fc1", 1, 1024, 512, 2048, "nt"),
    ("block fc2", 1, 1024, 2048, 512, "nt"),
    ("mlp fc1, B row-major", 1, 256, 1024, 4096, "nn"),
    ("block fc1, B row-major", 1, 1024, 512, 2048, "nn"),
    ("block q @ k^T (64 heads x batch)", 64, 128, 64, 128, "nt"),
    ("block p @ v (64 heads x batch)", 64, 128, 128, 64, "nn"),
]
LIBS = ("torch", "mkl", "numpy", "openblas32")

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS = 101, 111, 112
c_int_p = ctypes.POINTER(ctypes.c_int)
c_float_p = ctypes.POINTER(ctypes.c_float)


def fptr(t):
    return ctypes.cast(t.data_ptr(), c_float_p)


# --------------------------------------------------------------------------- libraries


class MKL:
    """MKL inside torch's libtorch_cpu.so (LP64: 32-bit integers)."""

    def __init__(self):
        path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.sgemm = self.lib.sgemm_
        self.sgemm.restype = None
        self.batch = self.lib.cblas_sgemm_batch
        self.batch.restype = None
        buf = ctypes.create_string_buffer(256)
        try:
            self.lib.MKL_Get_Version_String(buf, 256)
            self.version = buf.value.decode().strip()
        except AttributeError:
            self.version = "?"
        self.lib.MKL_Get_Max_Threads.restype = ctypes.c_int
        self.threads = self.lib.MKL_Get_Max_Threads()

    def gemm(self, a, b, c, m, k, n, layout):
        """Row-major C[M,N] = A[M,K] @ op(B) as column-major C^T = op(B)^T A^T."""
        i = ctypes.c_int
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        if layout == "nn":  # B [K, N] row-major = B^T col-major (N x K), lda N
            args = (ctypes.c_char(b"N"), ctypes.c_char(b"N"), i(n), i(m), i(k), one, fptr(b), i(n), fptr(a), i(k),
                    zero, fptr(c), i(n))
        else:  # W [N, K] row-major = W^T col-major (K x N): transpose it
            args = (ctypes.c_char(b"T"), ctypes.c_char(b"N"), i(n), i(m), i(k), one, fptr(b), i(k), fptr(a), i(k),
                    zero, fptr(c), i(n))
        refs = [ctypes.byref(x) if not isinstance(x, ctypes._Pointer) else x for x in args]
        f = self.sgemm
        return lambda: f(*refs)

    def gemm_batched(self, a, b, c, batch, m, k, n, layout):
        one = lambda ty, v: ctypes.pointer(ty(v))  # noqa: E731
        tb = CBLAS_NO_TRANS if layout == "nn" else CBLAS_TRANS
        ldb = n if layout == "nn" else k
        sa, sb, sc = m * k, k * n, m * n
        arr = lambda base, stride: (ctypes.c_void_p * batch)(  # noqa: E731
            *[base.data_ptr() + 4 * stride * i for i in range(batch)])
        a_arr, b_arr, c_arr = arr(a, sa), arr(b, sb), arr(c, sc)
        args = (ctypes.c_int(CBLAS_ROW_MAJOR), one(ctypes.c_int, CBLAS_NO_TRANS), one(ctypes.c_int, tb),
                one(ctypes.c_int, m), one(ctypes.c_int, n), one(ctypes.c_int, k), one(ctypes.c_float, 1.0),
                a_arr, one(ctypes.c_int, k), b_arr, one(ctypes.c_int, ldb), one(ctypes.c_float, 0.0), c_arr,
                one(ctypes.c_int, n), ctypes.c_int(1), one(ctypes.c_int, batch))
        f = self.batch
        return lambda: f(*args)


class OpenBLAS32:
    """The scipy-openblas32 wheel (symbols prefixed scipy_, 32-bit integers)."""

    def __init__(self):
        import scipy_openblas32

        libs = sorted(glob.glob(os.path.join(scipy_openblas32.get_lib_dir(), "*.so*")))
        self.path = libs[0]
        self.lib = ctypes.CDLL(self.path)
        self.lib.scipy_openblas_set_num_threads(ctypes.c_int(THREADS))
        self.lib.scipy_openblas_get_num_threads.restype = ctypes.c_int
        self.threads = self.lib.scipy_openblas_get_num_threads()
        self.lib.scipy_openblas_get_config.restype = ctypes.c_char_p
        self.lib.scipy_openblas_get_corename.restype = ctypes.c_char_p
        self.version = f"scipy-openblas32 {scipy_openblas32.__version__}"
        self.config = self.lib.scipy_openblas_get_config().decode()
        self.corename = self.lib.scipy_openblas_get_corename().decode()
        self.sgemm = self.lib.scipy_cblas_sgemm
        self.sgemm.restype = None
        self.sgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                               ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
        self.strided = self.lib.scipy_cblas_sgemm_batch_strided
        self.strided.restype = None
        self.strided.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                                 ctypes.c_int, ctypes.c_int]

    def gemm(self, a, b, c, m, k, n, layout, offsets=(0, 0, 0)):
        tb, ldb = (CBLAS_NO_TRANS, n) if layout == "nn" else (CBLAS_TRANS, k)
        args = (CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, tb, m, n, k, 1.0, a.data_ptr() + offsets[0], k,
                b.data_ptr() + offsets[1], ldb, 0.0, c.data_ptr() + offsets[2], n)
        f = self.sgemm
        return lambda: f(*args)

    def gemm_batched(self, a, b, c, batch, m, k, n, layout):
        tb, ldb = (CBLAS_NO_TRANS, n) if layout == "nn" else (CBLAS_TRANS, k)
        args = (CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, tb, m, n, k, 1.0, a.data_ptr(), k, m * k, b.data_ptr(), ldb,
                k * n, 0.0, c.data_ptr(), n, m * n, batch)
        f = self.strided
        return lambda: f(*args)


def mkl_verbose_banner():
    """MKL's MKL_VERBOSE first line, which names the code path it dispatched
    to (on Intel CPUs e.g. "Intel(R) AVX-512 ... enabled processors")."""
    code = "import torch; torch.set_num_threads(2); a = torch.randn(64, 64); torch.mm(a, a)"
    try:
        p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, MKL_VERBOSE="1"), capture_output=True,
                           text=True, timeout=120)
        return (p.stdout + p.stderr).splitlines()[0].strip()
    except Exception as e:  # noqa: BLE001
        return f"? ({type(e).__name__})"


def numpy_openblas_info(np):
    """Thread count and core of numpy's bundled OpenBLAS (set to THREADS)."""
    libs = glob.glob(os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs", "*openblas*.so*"))
    info = {"numpy": np.__version__}
    if not libs:
        return info
    lib = ctypes.CDLL(libs[0])
    info["library"] = libs[0]
    for suffix in ("64_", ""):
        try:
            getattr(lib, f"scipy_openblas_set_num_threads{suffix}")(ctypes.c_int(THREADS))
            get = getattr(lib, f"scipy_openblas_get_num_threads{suffix}")
            get.restype = ctypes.c_int
            info["threads"] = get()
            cfg = getattr(lib, f"scipy_openblas_get_config{suffix}")
            cfg.restype = ctypes.c_char_p
            info["config"] = cfg().decode()
            core = getattr(lib, f"scipy_openblas_get_corename{suffix}")
            core.restype = ctypes.c_char_p
            info["corename"] = core().decode()
            break
        except AttributeError:
            continue
    return info


# --------------------------------------------------------------------------- benchmark


def build_calls(libs, np, batch, m, k, n, layout):
    """{lib: (callable, output tensor)} and the float64 reference."""
    g = torch.Generator().manual_seed(m * 7 + k * 3 + n + batch)
    shape_a = (batch, m, k) if batch > 1 else (m, k)
    shape_b = (k, n) if layout == "nn" else (n, k)
    shape_b = (batch, *shape_b) if batch > 1 else shape_b
    a = torch.randn(*shape_a, generator=g)
    b = torch.randn(*shape_b, generator=g)
    b_op = b if layout == "nn" else b.transpose(-1, -2)
    ref = torch.matmul(a.double(), b_op.double())
    out_shape = tuple(ref.shape)
    calls = {}
    if "torch" in libs:
        c = torch.empty(out_shape)
        mm = torch.bmm if batch > 1 else torch.mm
        calls["torch"] = (lambda mm=mm, c=c: mm(a, b_op, out=c), c)
    if "numpy" in libs and np is not None:
        c = torch.empty(out_shape)
        an, bn, cn = a.numpy(), b_op.numpy(), c.numpy()  # share memory with the tensors
        calls["numpy"] = (lambda cn=cn: np.matmul(an, bn, out=cn), c)
    for name in ("mkl", "openblas32"):
        lib = libs.get(name)
        if lib is None:
            continue
        c = torch.empty(out_shape)
        if batch > 1:
            calls[name] = (lib.gemm_batched(a, b, c, batch, m, k, n, layout), c)
            c2 = torch.empty(out_shape)
            if name == "mkl":
                singles = [lib.gemm(a[i], b[i], c2[i], m, k, n, layout) for i in range(batch)]
            else:
                singles = [lib.gemm(a, b, c2, m, k, n, layout, (4 * i * m * k, 4 * i * k * n, 4 * i * m * n))
                           for i in range(batch)]

            def loop(singles=singles):
                for f in singles:
                    f()

            calls[name + " loop"] = (loop, c2)
        else:
            calls[name] = (lib.gemm(a, b, c, m, k, n, layout), c)
    return calls, ref


def bench_shape(calls, runs, rounds=3, warmup_s=0.3, pause_s=0.2):
    """Median and fastest seconds per call of each library.

    Each library is timed in a contiguous block, ROUNDS times in turn, after a
    pause and two untimed calls: the libraries' thread pools spin-wait after a
    call (OpenBLAS for about 0.1 s, libgomp briefly), and with 2 threads on 2
    CPUs a spinning pool of one library halves the speed of the next one if
    they alternate call by call."""
    samples = {k: [] for k in calls}
    for name, (f, _) in calls.items():
        time.sleep(pause_s)
        t_end = time.perf_counter() + warmup_s
        i = 0
        while i < 3 or time.perf_counter() < t_end:
            f()
            i += 1
    rounds = max(1, min(rounds, runs))
    for r in range(rounds):
        n = runs // rounds + (1 if r < runs % rounds else 0)
        for name, (f, _) in calls.items():
            time.sleep(pause_s)
            f()
            f()
            for _ in range(n):
                t0 = time.perf_counter()
                f()
                samples[name].append(time.perf_counter() - t0)
    return {k: (statistics.median(v), min(v)) for k, v in samples.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=40, help="timed calls per library and shape (default %(default)s)")
    p.add_argument("--json", default=os.path.join(HERE, "gemm_blas.json"), help="default %(default)s")
    p.add_argument("--md", default=os.path.join(HERE, "GEMM_BLAS_section.md"), help="default %(default)s")
    p.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                   help="before each shape, wait up to S seconds for other processes to use < 10%% of the "
                        "CPUs (over 5 s)")
    p.add_argument("--retries", type=int, default=0,
                   help="time a shape up to this many more times while other processes took > 10%% of the CPUs; "
                        "the attempt with the least other load is kept")
    a = p.parse_args(argv)
    torch.set_num_threads(THREADS)
    quiet = None
    if a.wait_quiet > 0:
        print(f"waiting up to {a.wait_quiet:.0f} s for a quiet machine ...", flush=True)
        quiet = wait_quiet(a.wait_quiet)
        print(f"  {quiet}", flush=True)

    libs, lib_info, lib_errors = {"torch": True}, {}, {}
    lib_info["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads(),
                         "mkl": torch.backends.mkl.is_available()}
    try:
        mkl = MKL()
        libs["mkl"] = mkl
        lib_info["mkl"] = {"library": mkl.path, "version": mkl.version, "threads": mkl.threads,
                           "verbose_banner": mkl_verbose_banner()}
    except Exception as e:  # noqa: BLE001
        lib_errors["mkl"] = f"{type(e).__name__}: {e}"
    np = None
    try:
        import numpy as np

        libs["numpy"] = True
        lib_info["numpy"] = numpy_openblas_info(np)
    except Exception as e:  # noqa: BLE001
        lib_errors["numpy"] = f"{type(e).__name__}: {e} (pip install numpy)"
    try:
        ob = OpenBLAS32()
        libs["openblas32"] = ob
        lib_info["openblas32"] = {"library": ob.path, "version": ob.version, "threads": ob.threads,
                                  "config": ob.config, "corename": ob.corename}
    except Exception as e:  # noqa: BLE001
        lib_errors["openblas32"] = f"{type(e).__name__}: {e} (pip install scipy-openblas32)"

    rows = []
    total_load = CpuLoad()
    for label, batch, m, k, n, layout in SHAPES:
        calls, ref = build_calls(libs, np, batch, m, k, n, layout)
        attempts = []
        for attempt in range(1 + a.retries):
            if a.wait_quiet > 0 and (rows or attempt):
                wait_quiet(a.wait_quiet)
            load = CpuLoad()
            times = bench_shape(calls, a.runs)
            attempts.append((load.result(), times))
            if attempts[-1][0].get("other_cpu_pct", 0.0) <= 10.0:
                break
        load, times = min(attempts, key=lambda t: t[0].get("other_cpu_pct", 0.0))
        load = dict(load, attempts=len(attempts))
        flops = 2.0 * batch * m * k * n
        row = {"shape": label, "batch": batch, "M": m, "K": k, "N": n, "layout": layout, "flop": flops, "load": load,
               "libs": {}}
        for name, (_, c) in calls.items():
            err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
            med, best = times[name]
            row["libs"][name] = {"median_s": med, "min_s": best, "gflops": flops / med / 1e9,
                                 "gflops_at_min": flops / best / 1e9, "max_rel_err": err}
        rows.append(row)
        print(f"{label:36s} " + "  ".join(f"{k} {v['gflops']:6.1f}" for k, v in row["libs"].items()), flush=True)

    res = {
        "command": ".venv/bin/python " + os.path.relpath(os.path.abspath(__file__), REPO)
        + "".join(" " + shlex.quote(x) for x in (sys.argv[1:] if argv is None else argv)),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        **cpu_info(),
        "python": platform.python_version(),
        "threads": THREADS,
        "runs": a.runs,
        "loadavg": list(os.getloadavg()),
        "load": total_load.result(),
        "wait_quiet": quiet,
        "retries": a.retries,
        "libraries": lib_info,
        "library_errors": lib_errors,
        "rows": rows,
    }
    md = markdown(res)
    print()
    print(md)
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    with open(a.md, "w") as f:
        f.write(md + "\n")
    print(f"wrote {a.json} and {a.md}")
    return 0


def markdown(res) -> str:
    li = res["libraries"]
    lines = ["## CPU: GEMM throughput of candidate BLAS libraries", "", f"`{res['command']}`", ""]
    load = ", ".join(f"{x:.2f}" for x in res["loadavg"])
    desc = [f"torch {li['torch']['version']} `torch.mm`/`torch.bmm` with `out=`"]
    if "mkl" in li:
        desc.append(f"MKL from `libtorch_cpu.so` through ctypes ({li['mkl']['version']}, {li['mkl']['threads']} "
                    f"threads; MKL_VERBOSE: \"{li['mkl']['verbose_banner'].removeprefix('MKL_VERBOSE ')}\"): "
                    f"Fortran `sgemm_` on the transposed problem, `cblas_sgemm_batch` for batches")
    if "numpy" in li:
        n = li["numpy"]
        desc.append(f"numpy {n['numpy']} `np.matmul` with `out=` (bundled OpenBLAS, {n.get('threads', '?')} "
                    f"threads, core {n.get('corename', '?')})")
    if "openblas32" in li:
        o = li["openblas32"]
        desc.append(f"{o['version']} through ctypes (`scipy_cblas_sgemm`, `scipy_cblas_sgemm_batch_strided` for "
                    f"batches; {o['threads']} threads, core {o['corename']})")
    lines.append(f"Measured {res['date'][:10]} on {res['cpu_model']}, {res['threads']} threads, float32, median of "
                 f"{res['runs']} calls per library and shape after warm-up (each library in contiguous blocks, 3 rounds, 0.2 s pause between libraries); 1-minute load "
                 f"average at the end: {load}; other processes took {res['load'].get('other_cpu_pct', '?')}% of "
                 f"the CPUs during the whole run (from /proc/stat; column *other*: during the row's timing)."
                 + (" Before each shape the script waited for other processes to use < 10% of the CPUs over 5 s "
                    "(`--wait-quiet`)." if res.get("wait_quiet") else "")
                 + (f" A shape timed while they took more was timed again, up to {res['retries']} times, keeping "
                    "the least disturbed attempt (`--retries`)." if res.get("retries") else "")
                 + " Libraries: " + "; ".join(desc) + ".")
    lines.append("")
    lines.append("`nt` = A [M, K] times W^T with W [N, K] row-major (nn.Linear's weight, k in q @ k^T); `nn` = "
                 "both row-major. *loop*: one ctypes call per matrix of a batch from Python. Cells: median ms "
                 "(GFLOP/s at the median / at the fastest call); GFLOP/s = 2·batch·M·K·N / time; best median per "
                 "row in bold.")
    lines.append("")
    names = []
    for r in res["rows"]:
        for k in r["libs"]:
            if k not in names and not k.endswith(" loop"):
                names.append(k)
    lines.append("| GEMM | batch×M×K×N | layout | " + " | ".join(names) + " | other |")
    lines.append("| --- | --- | --- | " + " | ".join("---:" for _ in names) + " | ---: |")
    for r in res["rows"]:
        variants = [("", r["libs"])]
        if any(k.endswith(" loop") for k in r["libs"]):
            variants.append((" (loop)", {k[:-5]: v for k, v in r["libs"].items() if k.endswith(" loop")}))
        for tag, libs in variants:
            best = max(v["gflops"] for v in libs.values())
            cells = []
            for k in names:
                v = libs.get(k)
                if v is None:
                    cells.append("—")
                    continue
                s = f"{v['median_s'] * 1e3:.2f} ({v['gflops']:.0f} / {v['gflops_at_min']:.0f})"
                if v["max_rel_err"] > 1e-4:
                    s += f" err {v['max_rel_err']:.0e}"
                cells.append(f"**{s}**" if v["gflops"] == best else s)
            shape = f"{r['batch']}×{r['M']}×{r['K']}×{r['N']}"
            lines.append(f"| {r['shape']}{tag} | {shape} | {r['layout']} | " + " | ".join(cells)
                         + f" | {r['load'].get('other_cpu_pct', '?')}% |")
    lines.append("")
    if res["library_errors"]:
        lines.append("Not measured: " + "; ".join(f"{k}: `{v}`" for k, v in res["library_errors"].items()))
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
