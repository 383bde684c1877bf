"""``txqueue messages list|show|send|delete|ready``: each subcommand on both engines, keys as
JSON lists (as the dashboard writes them), listings in every format, refusals as exit 1."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from click.testing import CliRunner

import txqueue
from txqueue.cli.main import main

QUEUE = {
    "googlesql": "CREATE QUEUE Mail (Id STRING(MAX) NOT NULL, Part INT64 NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id, Part)",
    "postgresql": "CREATE QUEUE mail (id varchar NOT NULL, part bigint NOT NULL,"
    " payload bytea NOT NULL, PRIMARY KEY (id, part))",
}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def ok(*args: str) -> str:
    code, output = invoke(*args)
    assert code == 0, output
    return output


def _lines(output: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


def _mail(url: str) -> txqueue.Database:
    db = txqueue.connect(url)
    db.update_ddl([QUEUE[db.dialect.value]])
    return db


def test_send_list_and_show_in_every_format(database_url: str, tmp_path: Path) -> None:
    db = _mail(database_url)
    try:
        url = ["--database", database_url]
        assert "sent 2 message(s)" in ok(
            "messages", "send", "Mail", '["a", 1]', '["b", 2]', "--payload", "hello", *url
        )
        binary = tmp_path / "payload.bin"
        binary.write_bytes(b"\xff\x00 raw")
        ok("messages", "send", "Mail", '["c", 3]', "--payload-file", str(binary), "--delay", "2h",
           *url)  # fmt: skip
        records = _lines(ok("messages", "list", "Mail", "--format", "json", *url))
        assert [(r["key"], r["state"]) for r in records] == [
            (["a", 1], "ready"),
            (["b", 2], "ready"),
            (["c", 3], "scheduled"),
        ]
        scheduled = _lines(ok("messages", "list", "Mail", "--state", "scheduled", "--json", *url))
        assert [r["key"] for r in scheduled] == [["c", 3]]
        rows = list(csv.DictReader(io.StringIO(ok("messages", "list", "Mail", "--format", "csv",
                                                 "--limit", "2", *url))))  # fmt: skip
        assert [row["key"] for row in rows] == ['["a", 1]', '["b", 2]']
        assert "scheduled" in ok("messages", "list", "Mail", *url)

        [shown] = _lines(ok("messages", "show", "Mail", '["c", 3]', "--json", *url))
        assert (shown["payload"], shown["payload_encoding"]) == ("/wAgcmF3", "base64")
        table = ok("messages", "show", "Mail", '["a", 1]', *url)
        assert "hello" in table and "deliver_time" in table
        code, output = invoke("messages", "show", "Mail", '["zz", 9]', *url)
        assert code == 1 and "NotFound" in output
    finally:
        db.close()


def test_delete_and_ready_refuse_leased_messages_without_force(database_url: str) -> None:
    db = _mail(database_url)
    try:
        url = ["--database", database_url]
        later = datetime.now(timezone.utc) + timedelta(days=1)
        with db.batch() as batch:
            batch.send("Mail", ("a", 1), b"x")
            batch.send("Mail", ("b", 2), b"y", deliver_time=later)
            batch.send("Mail", ("c", 3), b"z", deliver_time=later)
        [leased] = db.receive_now("Mail", lease_duration=timedelta(minutes=5))
        assert leased.key == ("a", 1)

        code, output = invoke("messages", "delete", "Mail", '["b", 2]', '["a", 1]', *url)
        assert code == 1 and "FailedPrecondition" in output and "--force" in output, output
        code, output = invoke("messages", "delete", "Mail", '["nope", 0]', *url)
        assert code == 1 and "NotFound" in output
        code, output = invoke("messages", "delete", "Mail", "not json", *url)
        assert code == 1 and "InvalidArgument" in output
        assert len(db.list_messages("Mail")) == 3

        assert "1 message(s) of Mail ready now" in ok("messages", "ready", "Mail", '["b", 2]', *url)
        assert [m.key for m in db.list_messages("Mail", state="ready")] == [("b", 2)]
        code, output = invoke("messages", "ready", "Mail", '["a", 1]', *url)
        assert code == 1 and "FailedPrecondition" in output
        ok("messages", "ready", "Mail", '["b", 2]', "--deliver-time", "2099-01-01T00:00Z", *url)
        assert db.get_message("Mail", ("b", 2)).deliver_time.year == 2099
        code, output = invoke("messages", "ready", "Mail", '["b", 2]', "--deliver-time",
                              "2099-01-01T00:00", *url)  # fmt: skip
        assert code == 2 and "zone" in output

        assert "deleted 2 message(s)" in ok(
            "messages", "delete", "Mail", '["a", 1]', '["c", 3]', "--force", *url
        )
        assert [m.key for m in db.list_messages("Mail")] == [("b", 2)]
    finally:
        db.close()
