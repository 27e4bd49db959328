"""One round of every collective through a braze.comm communicator, each
result checked against the value it must have (and, given a
torch.distributed group over the same ranks, against torch.distributed's).

The inputs depend only on the rank, so every rank knows what every other
contributed. The same checks run on the Gloo adapter (CPU tensors; the
tests on this machine) and on the nccl adapter (CUDA tensors;
tests/python/comm/test_nccl.py and benchmarks/gpu_check.py)."""

from __future__ import annotations

import torch


def check_collectives(comm, reference=None) -> list[str]:
    """Runs all_reduce (sum, avg, max; synchronous and async), all_gather,
    reduce_scatter, all_to_all_single, broadcast and barrier on `comm`'s
    device; returns one line per wrong result (empty: all right). Also
    checks that the post hooks saw every op succeed and that the flight
    recorder holds them as completed."""
    import json

    import torch.distributed as dist

    n, r, device = comm.world_size, comm.rank, torch.device(comm.device)
    failures: list[str] = []
    finished: list[dict] = []
    hook = comm.register_post_hook(finished.append)

    def expect(what, got, want, reference_result=None):
        got = got.cpu()
        if not torch.equal(got, want):
            failures.append(f"{what}: got {got.tolist()[:8]}, expected {want.tolist()[:8]}")
        if reference_result is not None and not torch.equal(got, reference_result.cpu()):
            failures.append(f"{what}: got {got.tolist()[:8]}, torch.distributed gave "
                            f"{reference_result.cpu().tolist()[:8]}")

    def on_device(t):
        return t.to(device)

    base = torch.arange(8, dtype=torch.float32)
    rank_sum = n * (n - 1) // 2
    # torch's Gloo has no AVG: torch.distributed checks sum and max only.
    for op, want, torch_op in (("sum", n * base + rank_sum, dist.ReduceOp.SUM), ("avg", base + rank_sum / n, None),
                               ("max", base + n - 1, dist.ReduceOp.MAX)):
        t = on_device(base + r)
        comm.all_reduce(t, op=op)
        theirs = None if torch_op is None else _reference(
            reference, lambda x: dist.all_reduce(x, torch_op, group=reference), on_device(base + r))
        expect(f"all_reduce {op}", t, want, theirs)

    # An integer average truncates toward zero (-2.5 -> -2), as in the native runtime.
    ints = torch.tensor([-3, 3], dtype=torch.int64)
    t = on_device(ints + r)
    comm.all_reduce(t, op="avg")
    expect("all_reduce avg int64", t, torch.div(n * ints + rank_sum, n, rounding_mode="trunc"))

    t = on_device(base + r)
    work = comm.all_reduce(t, async_op=True)
    work.wait()
    expect("async all_reduce", t, n * base + rank_sum)

    out = on_device(torch.empty(8 * n))
    comm.all_gather(out, on_device(base + r))
    theirs = _reference(reference, lambda x: dist.all_gather_into_tensor(x, on_device(base + r), group=reference),
                        on_device(torch.empty(8 * n)))
    expect("all_gather", out, torch.cat([base + s for s in range(n)]), theirs)

    block = 4
    scattered = torch.arange(block * n, dtype=torch.float32)
    out = on_device(torch.empty(block))
    comm.reduce_scatter(out, on_device(scattered + r))
    theirs = _reference(reference, lambda x: dist.reduce_scatter_tensor(x, on_device(scattered + r),
                                                                       group=reference), on_device(torch.empty(block)))
    expect("reduce_scatter", out, (n * scattered + rank_sum)[r * block:(r + 1) * block], theirs)

    def sent_by(s):
        return scattered + 100 * s

    out = on_device(torch.empty(block * n))
    comm.all_to_all_single(out, on_device(sent_by(r)))
    theirs = _reference(reference, lambda x: dist.all_to_all_single(x, on_device(sent_by(r)), group=reference),
                        on_device(torch.empty(block * n)))
    expect("all_to_all_single", out, torch.cat([sent_by(s)[r * block:(r + 1) * block] for s in range(n)]), theirs)

    t = on_device(torch.full((8,), float(r)))
    comm.broadcast(t, n - 1)
    expect("broadcast", t, torch.full((8,), float(n - 1)))

    comm.barrier()  # synchronous: every op before it has completed on this rank
    hook.remove()
    ops = len(finished)
    if ops != 10 or not all(info["ok"] and info["duration"] >= 0 for info in finished):
        failures.append(f"post hooks: expected 10 successful ops with durations, got {finished}")
    entries = json.loads(comm.flight_recorder_dump())["entries"][-10:]
    if [e["state"] for e in entries] != ["completed"] * 10:
        failures.append(f"flight recorder: {[(e['op'], e['state']) for e in entries]}")
    return failures


def _reference(group, run, tensor):
    """`tensor` after torch.distributed's op on it (`run`), or None without a group."""
    if group is None:
        return None
    run(tensor)
    return tensor
