"""``txqueue demo``: the welcome-email scenario of the Spanner queue docs, end to end on SQLite.

A user row and its welcome message are written in one transaction; a worker process
receives the message under a lease, "sends" the email and acknowledges it. A second user's
transaction fails after its send, and shows that a rolled-back send is never delivered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import click
from rich.console import Console
from rich.markup import escape

import txqueue
from txqueue.core.url import redact_url
from txqueue.drivers.engines import parse_url, traits_named

SCHEMA = [
    "CREATE TABLE Users (UserId INT64 NOT NULL, UserName STRING(MAX), Email STRING(MAX))"
    " PRIMARY KEY (UserId)",
    "CREATE QUEUE UserTasks (UserId INT64 NOT NULL, MessageId STRING(36) NOT NULL,"
    " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (UserId, MessageId),"
    " INTERLEAVE IN PARENT Users ON DELETE CASCADE",
]
USERS = [(124, "Ada", "ada@example.com"), (125, "Grace", "grace@example.com")]


@click.command()
@click.option("--database", default=None, help="SQLite URL (default: a fresh temporary file).")
@click.option("--worker-only", is_flag=True, hidden=True)
def demo(database: str | None, worker_only: bool) -> None:
    """Run the welcome-email scenario: producer and worker, on SQLite."""
    if worker_only:
        _worker(database or "")
        return
    console = Console()
    url = database or f"sqlite:///{tempfile.mkdtemp(prefix='txqueue-demo-')}/app.db"
    shown = escape(redact_url(url))
    console.print(f"[bold]txqueue demo[/] on [cyan]{shown}[/]")
    with txqueue.connect(url) as db:
        db.update_ddl(SCHEMA)
        console.print("created table [bold]Users[/] and queue [bold]UserTasks[/]")
        worker = subprocess.Popen(
            [sys.executable, "-m", "txqueue.cli.main", "demo", "--worker-only", "--database", url],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for user_id, name, email in USERS:
            payload = json.dumps({"type": "welcome", "email": email}).encode()
            with db.batch() as batch:  # the user row and its message commit together
                batch.insert("Users", ("UserId", "UserName", "Email"), [(user_id, name, email)])
                batch.send("UserTasks", (user_id, "welcome-email"), payload)
            console.print(f"producer: signed up [bold]{name}[/] and sent the welcome message")
        try:
            db.run_in_transaction(_sign_up_then_fail)
        except RuntimeError as error:
            console.print(f"producer: sign-up of Linus rolled back ({error}); its send too")
        deadline = time.monotonic() + 30
        while db.queue_info("UserTasks").ready + db.queue_info("UserTasks").leased:
            if time.monotonic() > deadline:
                worker.kill()
                raise click.ClickException("the worker did not drain the queue in 30 s")
            time.sleep(0.05)
        worker.terminate()
        worker.wait(10)
        with db.snapshot() as snapshot:
            users = snapshot.execute_sql("SELECT COUNT(*) FROM Users").one()[0]
            left = snapshot.execute_sql("SELECT COUNT(*) FROM UserTasks").one()[0]
        console.print(f"done: {users} users, {left} messages left in UserTasks")
    console.print(
        f"the database is left at [cyan]{_where(url)}[/];"
        " look inside with\n"
        f"  txqueue sql --database {shown} 'SELECT * FROM Users'\n"
        f"  txqueue queues --database {shown}",
        soft_wrap=True,  # whole lines, to copy and paste
    )


def _where(url: str) -> str:
    """Where the database is: a SQLite file's full path, else the URL without its password."""
    parsed = parse_url(url)
    if traits_named(parsed.engine).file_target:
        return escape(os.path.abspath(parsed.target))
    return escape(redact_url(url))


def _sign_up_then_fail(transaction: txqueue.Transaction) -> None:
    transaction.insert("Users", ("UserId", "UserName"), [(126, "Linus")])
    transaction.send("UserTasks", (126, "welcome-email"), b'{"type": "welcome"}')
    raise RuntimeError("payment check failed")


def _worker(url: str) -> None:
    """The worker process: receive, send the email (print it), ack with the lease token."""
    console = Console()
    with txqueue.connect(url) as db:
        for message in db.receive("UserTasks", max_duration=timedelta(seconds=30)):
            body = json.loads(message.payload)
            console.print(
                f"  worker: leased {message.key} (delivery {message.delivery_count}), "
                f"emailing [green]{body['email']}[/]"
            )

            def ack(transaction: txqueue.Transaction, message: txqueue.Message = message) -> None:
                transaction.ack("UserTasks", message.key, lease_token=message.lease_token)

            db.run_in_transaction(ack)
            console.print(f"  worker: acked {message.key}")


if __name__ == "__main__":
    demo()
