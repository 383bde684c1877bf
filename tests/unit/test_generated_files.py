"""The files tools/async_to_sync.py generates say so, and none claims to be its own source."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("async_to_sync", ROOT / "tools/async_to_sync.py")
assert _spec is not None and _spec.loader is not None
async_to_sync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(async_to_sync)
PAIRS = sorted(async_to_sync.FILES.items())


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[target for _, target in PAIRS])
def test_a_generated_file_names_its_source_and_says_do_not_edit(source: str, target: str) -> None:
    text = (ROOT / target).read_text()
    assert text.splitlines()[0] == (
        f"# Generated from {source} by tools/async_to_sync.py; do not edit."
    )
    docstring = text.split('"""')[1]
    assert not re.search(r"written by hand|generated from (this file|it)\b", docstring, re.I)
    assert re.search(rf"Generated from ``{re.escape(source)}``\s+by", docstring)


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[source for source, _ in PAIRS])
def test_a_source_names_its_generated_twin(source: str, target: str) -> None:
    docstring = (ROOT / source).read_text().split('"""')[1]
    assert not re.search(r"written by hand", docstring, re.I)
    assert re.search(
        rf"The sync twin ``{re.escape(target)}``\s+is generated from this file", docstring
    )
