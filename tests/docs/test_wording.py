"""User docs speak to users: no references to txqueue's internal sources (seed documents, the
SPEC), German quotations from them, or development rounds. docs/performance-history.md, the
log of every measurement round, is exempt (conftest.USER_DOCUMENTS leaves it out)."""

from __future__ import annotations

import re
from pathlib import Path

INTERNAL = {
    "a seed document": re.compile(r"\bseeds? 0\d\d\b", re.IGNORECASE),
    "the SPEC": re.compile(r"\bSPEC(\.md| §)"),
    "German text": re.compile(r"[äöüÄÖÜß]"),
    "a development round": re.compile(
        r"\b(\w+teenth|\w+tieth|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|"
        r"tenth|eleventh|twelfth|this|previous|earlier|next) rounds?\b(?! trip)",
        re.IGNORECASE,
    ),
}


def test_user_docs_do_not_cite_internal_sources(user_document: str, repository_root: Path) -> None:
    document = user_document
    found = [
        f"{document}:{number}: {what}: {line.strip()}"
        for number, line in enumerate((repository_root / document).read_text().splitlines(), 1)
        for what, pattern in INTERNAL.items()
        if pattern.search(line)
    ]
    assert not found, "\n".join(found)
