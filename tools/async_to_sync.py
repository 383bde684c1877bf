"""Generate the synchronous face of txqueue from the hand-written asyncio face.

    python tools/async_to_sync.py          # rewrite the generated files
    python tools/async_to_sync.py --check  # fail if any generated file is out of date (CI)

Token-level rewrite with ``unasync`` (async/await removed, Async* names mapped to their sync
twins), then ``ruff`` sorts imports and formats, so the output is stable and lint-clean.
"""

from __future__ import annotations

import argparse
import difflib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import unasync

ROOT = Path(__file__).resolve().parent.parent
FILES = {
    "txqueue/events/_async/publishing.py": "txqueue/events/_sync/publishing.py",
    "txqueue/events/_async/archive.py": "txqueue/events/_sync/archive.py",
    "txqueue/events/_async/events.py": "txqueue/events/_sync/events.py",
    "txqueue/drivers/_async_protocol.py": "txqueue/drivers/_sync_protocol.py",
    "txqueue/_async/drivers.py": "txqueue/_sync/drivers.py",
    "txqueue/_async/database.py": "txqueue/_sync/database.py",
    "txqueue/_async/transaction.py": "txqueue/_sync/transaction.py",
    "txqueue/drivers/sqlite/_async.py": "txqueue/drivers/sqlite/_sync.py",
    "txqueue/drivers/postgres/_async.py": "txqueue/drivers/postgres/_sync.py",
    "txqueue/drivers/spanner/_async.py": "txqueue/drivers/spanner/_sync.py",
    "txqueue/drivers/postgres/_async_dead_letters.py": "txqueue/drivers/postgres/_sync_dead_letters.py",
    "txqueue/drivers/postgres/_async_transaction.py": "txqueue/drivers/postgres/_sync_transaction.py",
    "txqueue/drivers/postgres/_async_server.py": "txqueue/drivers/postgres/_sync_server.py",
    "txqueue/drivers/postgres/_async_browse.py": "txqueue/drivers/postgres/_sync_browse.py",
    "txqueue/drivers/postgres/_async_actions.py": "txqueue/drivers/postgres/_sync_actions.py",
    "txqueue/worker/_async_apply.py": "txqueue/worker/_sync_apply.py",
    "txqueue/events/_async_guarded.py": "txqueue/events/_sync_guarded.py",
    "txqueue/events/_async_delivery.py": "txqueue/events/_sync_delivery.py",
    "txqueue/sql/_async_streaming.py": "txqueue/sql/_sync_streaming.py",
}
NAMES = {
    "_async": "_sync",
    "_async_dead_letters": "_sync_dead_letters",
    "_async_transaction": "_sync_transaction",
    "_async_server": "_sync_server",
    "_async_browse": "_sync_browse",
    "_async_actions": "_sync_actions",
    "_async_protocol": "_sync_protocol",
    "_async_compat": "_sync_compat",
    "_async_guarded": "_sync_guarded",
    "connect_async": "connect",
    "open_async_driver": "open_driver",
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncCursor": "Cursor",
    "AsyncIterator": "Iterator",
    "aiter_raw": "iter_raw",
    "aclose": "close",
}
_SYNC_PREFIX = re.compile(r"\bSync([A-Z]\w*)")  # unasync turns AsyncX into SyncX
_ASYNC_PREFIX = re.compile(r"\bAsync([A-Z]\w*)")  # names inside docstrings and comments
_AWAITABLE = re.compile(r"Awaitable\[(\w+)\]")
HEADER = "# Generated from {source} by tools/async_to_sync.py; do not edit.\n"
#: The source's docstring names its sync twin; the twin's says where it comes from instead.
_TWIN_SENTENCE = re.compile(
    r"The sync twin ``[^`]+``\s+is generated from this file\s+by\s+``tools/async_to_sync\.py``\."
)
_GENERATED_SENTENCE = "Generated from ``{source}`` by ``tools/async_to_sync.py``; do not edit."
#: Words a generated file must not say of itself (it would claim to be the source).
_SOURCE_CLAIM = re.compile(r"written by hand|generated from (this file|it)\b", re.IGNORECASE)


def generate(source: Path) -> str:
    """The sync twin of one async source file, formatted."""
    with tempfile.TemporaryDirectory() as scratch:
        async_dir = Path(scratch) / "_async_src"
        sync_dir = Path(scratch) / "_sync_out"
        async_dir.mkdir()
        copy = async_dir / "module.py"
        shutil.copy(source, copy)
        rule = unasync.Rule(str(async_dir), str(sync_dir), additional_replacements=NAMES)
        unasync.unasync_files([str(copy)], rules=[rule])
        out = sync_dir / "module.py"
        text = out.read_text()
        text = _SYNC_PREFIX.sub(r"\1", text)
        text = _ASYNC_PREFIX.sub(r"\1", text).replace("asyncio face", "sync face")
        text = _AWAITABLE.sub(r"\1", text)
        name = source.relative_to(ROOT).as_posix()
        sentence = _GENERATED_SENTENCE.format(source=name)
        if len(sentence) > 100:
            sentence = sentence.replace("`` by ``", "``\nby ``", 1)
        text = _TWIN_SENTENCE.sub(sentence, text)
        claim = _SOURCE_CLAIM.search(text)
        if claim:
            raise SystemExit(
                f"{name}: its sync twin would say {claim.group(0)!r} of itself; name the twin as "
                "'The sync twin ``path`` is generated from this file by "
                "``tools/async_to_sync.py``.'"
            )
        out.write_text(HEADER.format(source=name) + text)
        ruff = [sys.executable, "-m", "ruff", "--config", str(ROOT / "pyproject.toml")]
        subprocess.run(
            [*ruff, "check", "--quiet", "--fix", "--select", "I,F401,RUF022", str(out)],
            check=False,
            cwd=ROOT,
        )
        subprocess.run([*ruff[:3], "format", *ruff[3:], "--quiet", str(out)], check=True, cwd=ROOT)
        return out.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a file is out of date")
    args = parser.parse_args()
    stale = []
    for source_name, target_name in FILES.items():
        source, target = ROOT / source_name, ROOT / target_name
        if not source.exists():
            continue
        text = generate(source)
        current = target.read_text() if target.exists() else ""
        if text == current:
            continue
        if args.check:
            stale.append(target_name)
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(True), text.splitlines(True), target_name, "(generated)"
                )
            )
        else:
            target.write_text(text)
            print(f"wrote {target_name}")
    if stale:
        print(
            f"out of date: {', '.join(stale)}; run python tools/async_to_sync.py", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
