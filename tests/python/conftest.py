import os

import pytest

# Triton's kernels run in its interpreter in the tests (there is no GPU):
# Triton reads this once, when triton is first imported, so it is set before
# anything (torch included) can import it.
os.environ.setdefault("TRITON_INTERPRET", "1")


def _session_cache_dir(tmp_path_factory):
    """The session's compile cache: under pytest-xdist, the workers' common
    parent, so every worker of one run shares it (NativeCache locks and
    publishes atomically)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "braze-cache"


@pytest.fixture(autouse=True)
def session_cache(tmp_path_factory, monkeypatch):
    """One compile cache per test session, not per test: a kernel or model
    compiled by one test is a cache hit for every later one (child
    processes inherit it)."""
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(_session_cache_dir(tmp_path_factory)))


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """An empty cache of this test's own, for tests that count compilations
    or read the cache's entries."""
    monkeypatch.setenv("BRAZE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def refusing_compiler(tmp_path, monkeypatch):
    """`refuse(pattern)` makes $CXX fail every command line that contains
    `pattern` (one line in the returned log each time) and run the real
    compiler on the rest. Child processes inherit it."""
    def refuse(pattern: str):
        log = tmp_path / "refused.log"
        wrapper = tmp_path / "refusing-cxx"
        wrapper.write_text(f'#!/bin/sh\ncase "$*" in *{pattern}*) echo refused >> "{log}"; exit 1 ;; esac\n'
                           'exec c++ "$@"\n')
        wrapper.chmod(0o755)
        monkeypatch.setenv("CXX", str(wrapper))
        return log

    return refuse


@pytest.fixture
def clean_registry():
    """Removes the Python passes a test registers."""
    from braze.passes import registry

    before = dict(registry._passes)
    yield
    registry._passes.clear()
    registry._passes.update(before)


class CompilerLog:
    """Counts the compilations a wrapped $CXX ran."""

    def __init__(self, path):
        self.path = path

    @property
    def runs(self) -> int:
        return len(self.path.read_text().splitlines()) if self.path.exists() else 0


@pytest.fixture
def logging_compiler(tmp_path, monkeypatch, private_cache):
    """$CXX that records every compilation in a log, then runs the real
    compiler (`--version` for the cache key and `-fsyntax-only` flag probes,
    asked once per process, and the prelude's precompilation, once per
    cache, are not compilations), over a private cache. Child processes
    inherit it."""
    log = tmp_path / "compiler.log"
    wrapper = tmp_path / "cxx"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in --version|*-fsyntax-only*|*c++-header*) ;; '
                       f'*) echo run >> "{log}" ;; esac\n'
                       'exec c++ "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    return CompilerLog(log)


@pytest.fixture
def imported_graphs(monkeypatch):
    """The graphs torch.compile(backend="braze") imports from now on (each an
    ImportedGraph: its module and extern calls), Dynamo's caches reset."""
    import torch

    from braze.frontend import dynamo

    imported = []
    real = dynamo.import_graph
    monkeypatch.setattr(dynamo, "import_graph", lambda gm, **kw: imported.append(real(gm, **kw)) or imported[-1])
    torch._dynamo.reset()
    return imported
