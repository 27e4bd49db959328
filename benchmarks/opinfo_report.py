#!/usr/bin/env python3
"""Pass rate of PyTorch's OpInfo samples through braze.export and the
reference interpreter, per op and dtype, against eager PyTorch.

    .venv/bin/python benchmarks/opinfo_report.py [--max-samples N] [--dtypes float32,int64]
"""

import argparse
import sys
import warnings

import torch

from braze.testing.opinfo import opinfos, run_op, summarize


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-samples", type=int, default=None)
    parser.add_argument("--dtypes", default="float32,int64,bfloat16,bool")
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (default: all)")
    parser.add_argument("--backend", default="reference", choices=["reference", "cpu"],
                        help="run the captured programs on the reference interpreter or compiled for the CPU")
    parser.add_argument("--verbose", action="store_true", help="print why each sample did not pass")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    wanted = set(filter(None, args.ops.split(",")))

    print(f"{'op':44} {'pass':>5} {'fail':>5} {'refused':>8} {'untraceable':>12}  pass rate")
    totals = summarize([])
    failures = []
    for name, info in opinfos().items():
        if wanted and name not in wanted:
            continue
        results = run_op(info, {args.backend: (dtypes, args.max_samples)})
        counts = summarize(results)
        totals.update(counts)
        print(_row(name, counts))
        failures += [r for r in results if r.outcome in ("mismatch", "error")]
        if args.verbose:
            for r in results:
                if r.outcome != "pass":
                    print(f"    {r.outcome} {r.dtype}: {r.detail}")
    print("\n" + _row("total", totals))
    for r in failures:
        print(f"FAILED ({r.outcome}) {r.op} {r.dtype}: {r.detail}")
    return 1 if failures else 0


def _row(name, counts) -> str:
    failed = counts["mismatch"] + counts["error"]
    capturable = counts["pass"] + failed + counts["unsupported"]
    rate = f"{100 * counts['pass'] / capturable:5.1f}%" if capturable else "    -"
    return (f"{name:44} {counts['pass']:5} {failed:5} {counts['unsupported']:8} "
            f"{counts['untraceable']:12}  {rate}")


if __name__ == "__main__":
    sys.exit(main())
