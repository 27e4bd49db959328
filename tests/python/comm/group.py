"""The test-side view of braze.comm.launch: failures become AssertionErrors."""

from __future__ import annotations

import os

from braze.comm.launch import spawn_group


def run_group(worker, world, backend="shm", *, args=(), deadline=60.0, comm_timeout=10.0, options=None,
              expect_dead=()):
    try:
        return spawn_group(worker, world, backend, args=args, deadline=deadline, timeout=comm_timeout,
                           options=options, expect_dead=expect_dead)
    except RuntimeError as exc:
        raise AssertionError(str(exc)) from None


def kill_self():
    os.kill(os.getpid(), 9)
