"""The documentation site builds with ``mkdocs build --strict``: no broken link, no page left
out of the navigation, and every ``::: name`` of the API reference resolved by mkdocstrings.
Prints one line, "docs site: N pages, M documented API names"."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")


def _inventory_names(path: Path) -> list[str]:
    """The object names of a Sphinx inventory (objects.inv), as mkdocstrings writes it."""
    data = path.read_bytes()
    header_end = 0
    for _ in range(4):  # four header lines, then the zlib-compressed body
        header_end = data.index(b"\n", header_end) + 1
    body = zlib.decompress(data[header_end:]).decode("utf-8")
    return [line.split(" ", 1)[0] for line in body.splitlines() if " py:" in line]


def test_the_site_builds_strictly_and_documents_the_api(
    tmp_path: Path, site_summary: list[str]
) -> None:
    site = tmp_path / "site"
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    sources = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    pages = [p for p in site.rglob("index.html") if "assets" not in p.parts]
    # Every document is a page of the site (index.md is the site's root page).
    assert len(pages) == len(sources), (sorted(map(str, pages)), sources)

    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    asked = re.findall(r"^::: (\S+)$", reference, re.M)
    names = set(_inventory_names(site / "objects.inv"))
    missing = [name for name in asked if name not in names]
    assert not missing, missing
    site_summary.append(f"docs site: {len(pages)} pages, {len(names)} documented API names")
