"""Ranks of the distributed tuning test (spawned: a module of their own)."""

from pathlib import Path


def choose_with_rank_timings(comm, rank, world, directory):
    """Each rank times the configurations differently (its own fastest is
    config `rank`); the shared timings make them all choose alike."""
    import braze
    from braze.runtime.autotune import Tuner, config_space
    from braze.target import get
    from braze.testing.kernels import kernel_form
    from braze.codegen.triton import render_module

    triton = get("triton")
    text = """
    func.func @f(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
      %y = braze.exp %x : tensor<?x64xf32>
      return %y : tensor<?x64xf32>
    }"""
    _, kernels = kernel_form(braze.parse(text), triton.pipeline(triton.options()))
    (spec,) = render_module(kernels)[1].values()
    space = config_space(spec)
    times = {config: (0.1 if k == rank else 1.0 + k) for k, config in enumerate(space)}
    times[space[-1]] = 0.5  # second best everywhere: the agreed choice
    tuner = Tuner(Path(directory) / f"rank{rank}", measure=lambda run: run(), comm=comm)
    chosen = tuner.choose(spec, "hash", (), "cuda:test", lambda config: times[config])
    return space.index(chosen), len(space)
