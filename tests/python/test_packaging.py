"""The development requirements stay in step with pyproject.toml."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_build_requirements_are_in_requirements_dev():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    dev = {
        line.strip()
        for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    missing = set(pyproject["build-system"]["requires"]) - dev
    assert not missing, f"add to requirements-dev.txt: {sorted(missing)}"


def test_runtime_pins_match_build_pins():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = set(pyproject["build-system"]["requires"])
    for requirement in pyproject["project"]["dependencies"]:
        if "==" in requirement:
            assert requirement in build, f"{requirement} is pinned differently for building"
