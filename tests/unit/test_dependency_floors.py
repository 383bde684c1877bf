"""The dashboard's web dependencies are required at releases that carry their published
security fixes: starlette 1.3.1 (form limits on urlencoded bodies, CVE-2026-54283; before it
0.49.1, 0.47.2 and 0.40 for CVE-2025-62727, CVE-2025-54121 and CVE-2024-47874) and
python-multipart 0.0.31 (0.0.18 for CVE-2024-53981, 0.0.22 for CVE-2026-24486, then the
DoS fixes up to 0.0.31). The floors were starlette 0.40 and python-multipart 0.0.9."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
FLOORS = {"starlette": Version("1.3.1"), "python-multipart": Version("0.0.31")}


def _dashboard() -> dict[str, Requirement]:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    found = (Requirement(text) for text in extras["dashboard"])
    return {requirement.name: requirement for requirement in found}


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_floor_carries_the_fixes(name: str) -> None:
    requirement = _dashboard()[name]
    floors = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    assert floors and min(floors) >= FLOORS[name], str(requirement)


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_the_installed_release_meets_it(name: str) -> None:
    assert _dashboard()[name].specifier.contains(version(name))
