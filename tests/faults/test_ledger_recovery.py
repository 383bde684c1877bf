"""An outcome nobody heard is resolved through the idempotency ledger, on both engines.

A process applies an effect with `txqueue.patterns.run_once` (ledger key + effect in one
transaction) and is killed with SIGKILL either *during* its COMMIT or right *after* it, before
it could tell anyone. Its caller — the test — does not know whether the effect happened: the
unknown-commit problem of seed 000, which on SQLite has no other answer (no server to ask;
the same holds after a power loss under ``synchronous=NORMAL``). It runs ``run_once`` with the
same key again. The ledger answers: applied now (True) if the first never committed, skipped
(False) if it did — and the effect exists exactly once either way.

During the COMMIT means, on SQLite, before the COMMIT statement runs (a trace callback blocks
it: the kill rolls the transaction back); on Cloud Spanner, before the client sends its commit
(the same); on PostgreSQL, after COMMIT reached the server (a deferred test trigger blocks it
on an advisory lock the test releases after the kill: the transaction commits with no client
left to hear it).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import txqueue
from txqueue.patterns import ledger_key, run_once

from .harness import (
    Gates,
    create_schema,
    install_gates,
    is_postgres,
    read_effects,
    wait_for,
    with_query,
    workers_in,
)


@pytest.mark.parametrize("point", ["ack-commit", "after-commit"])
def test_killed_mid_commit_the_ledger_tells_whether_it_happened(
    database_url: str, tmp_path: Path, point: str, fault_figures: dict[str, Any]
) -> None:
    key = ledger_key("charge", "order-1")
    postgres_gate = is_postgres(database_url) and point == "ack-commit"
    gates: Gates | None = None
    with txqueue.connect(database_url) as db:
        create_schema(db)
        url, options = database_url, {"pause_at": point, "pause_on": 1}
        if postgres_gate:
            install_gates(database_url)
            gates = Gates(database_url)
            application = f"commit:{gates.take()}"
            url, options = with_query(database_url, application_name=application), {}
        try:
            with workers_in(tmp_path / "workers") as workers:
                workers.start(workers.config("payer", url, 1.0, **options), "run_once", key)
                if gates is not None:
                    wait_for(lambda: gates.waiting(application), 30, "the COMMIT to block")
                else:
                    wait_for(lambda: workers.has_event("payer", "pause"), 30, "the pause")
                workers.kill("payer")
                assert not workers.has_event("payer", "done")  # nobody heard the outcome
                if gates is not None:
                    gates.release(gates.next_lock)  # the orphaned backend finishes its COMMIT
                    wait_for(lambda: gates.gone(application), 30, "the orphan to finish")
            first_committed = any(e.worker == "payer" for e in read_effects(db))
            applied_now = run_once(db, key, _effect(key))
            effects = [e for e in read_effects(db) if e.token == key]
        finally:
            if gates is not None:
                gates.close()
    fault_figures.update(
        engine="postgres" if is_postgres(database_url) else database_url.split(":", 1)[0],
        point=point,
        first_attempt_committed=first_committed,
        rerun_applied=applied_now,
    )
    assert len(effects) == 1, effects
    assert applied_now is (not first_committed)
    expected_first = point == "after-commit" or postgres_gate
    assert first_committed is expected_first


def _effect(key: str) -> Any:
    def apply(txn: txqueue.Transaction) -> None:
        row = ("rerun", 0, key, "rerun", datetime.now(timezone.utc))
        txn.insert("effects", ("effectid", "msgkey", "token", "worker", "appliedat"), [row])

    return apply
