import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "frontend"))


def need(what: str, missing: str | None) -> None:
    """Skips when a toolchain is missing, fails instead under
    BRAZE_REQUIRE_TOOLCHAINS=1 (CI installs them all)."""
    from braze.target import require_toolchains

    if missing is None:
        return
    message = f"{what}: {missing}"
    if require_toolchains():
        pytest.fail(message + " (BRAZE_REQUIRE_TOOLCHAINS=1)")
    pytest.skip(message)


def need_program(name: str) -> str:
    path = shutil.which(name)
    need(name, None if path else f"{name} is not on PATH")
    return path


def target_unit(target_name: str, text: str, **options):
    """(target, options, Unit): IR `text` through target `target_name`'s
    own pipeline and emitter (skipped without its compiler)."""
    from braze import target as targets
    from braze.codegen import function_operations
    from braze.ir import parse
    from braze.passes import run_pipeline

    target = targets.get(target_name)
    need(f"the {target_name} target", target.compiler_missing())
    chosen = target.options(options)
    module = parse(text)
    run_pipeline(module, target.pipeline(chosen))
    func = next(iter(module.mlir_module.body.operations))
    return target, chosen, target.emit(function_operations(func), chosen)


def nvcc_entry_functions(source) -> list[str]:
    """The entry functions nvcc's -Xptxas -v report (build.log beside
    `source`) names, once it says that none of them, nor any device
    function kept out of line, spills registers."""
    report = (source.parent / "build.log").read_text()
    entries = re.findall(r"Compiling entry function '(\w+)'", report)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert entries and len(spills) >= len(entries) and all(s == ("0", "0") for s in spills), report
    return entries
