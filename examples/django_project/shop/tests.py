"""The shop's tests, run by Django's test runner (``python manage.py test shop``).

They use ``TransactionTestCase``: a send must commit to be seen by txqueue, and ``TestCase``
never commits.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
from django.core.management import call_command
from django.db import connections, transaction
from django.test import Client, TransactionTestCase, override_settings

import txqueue
from shop.models import Order
from txqueue.contrib import django as txq
from txqueue.contrib.django.apps import check_settings
from txqueue.contrib.django.operations import UpdateDdl
from txqueue.contrib.django.settings import database_url
from txqueue.errors import FailedPrecondition, InvalidArgument

PROJECT = Path(__file__).resolve().parents[1]


def order_email_keys() -> list[tuple[object, ...]]:
    return [message.key for message in txq.database().list_messages("OrderEmails")]


def manage(*arguments: str) -> subprocess.Popen[str]:
    """``manage.py`` as its own process, on this test's database."""
    environment = {**os.environ, "SHOP_DATABASE_URL": database_url()}
    return subprocess.Popen(
        [sys.executable, "manage.py", *arguments],
        cwd=PROJECT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


class OrderEmailTests(TransactionTestCase):
    def setUp(self) -> None:
        txq.database().purge_dead_letters("OrderEmails")
        with txq.database().batch() as batch:  # the queue is not a model: not flushed
            batch.delete("OrderEmails", None)

    def test_order_and_its_email_commit_together(self) -> None:
        answer = Client().post(
            "/orders", json.dumps({"email": "ada@example.com"}), content_type="application/json"
        )
        self.assertEqual(answer.status_code, 201)
        order_id = answer.json()["order_id"]
        self.assertEqual(order_email_keys(), [(order_id,)])

    def test_first_send_of_a_fresh_process(self) -> None:
        # txqueue opens as Django connects: opened later, inside the atomic block that has
        # just written the order, it would wait on that block's own lock on SQLite
        post = (
            "from django.test import Client; "
            "print(Client().post('/orders', {'email': 'eve@example.com'},"
            " content_type='application/json').status_code)"
        )
        shell = manage("shell", "--no-imports", "-c", post)
        output, _ = shell.communicate(timeout=60)
        self.assertEqual(output.strip().splitlines()[-1:], ["201"], output)
        self.assertEqual(len(order_email_keys()), 1)

    def test_rolled_back_block_sends_nothing(self) -> None:
        with contextlib.suppress(RuntimeError), transaction.atomic():
            order = Order.objects.create(email="bob@example.com")
            with txq.batch() as batch:
                batch.send("OrderEmails", (order.pk,), b"{}")
            self.assertEqual(order_email_keys(), [])  # not committed: txqueue cannot see it
            raise RuntimeError("payment declined")
        self.assertEqual(Order.objects.count(), 0)
        self.assertEqual(order_email_keys(), [])

    def test_run_in_transaction_reads_its_own_send(self) -> None:
        def send_and_count(txn: txqueue.Transaction) -> int:
            txn.send("OrderEmails", (7,), b"{}")
            rows = txn.execute_sql("SELECT OrderId FROM OrderEmails")
            return len(list(rows))

        with transaction.atomic():
            self.assertEqual(txq.run_in_transaction(send_and_count), 1)
        self.assertEqual(order_email_keys(), [(7,)])

    def test_outside_atomic_is_refused(self) -> None:
        with self.assertRaisesRegex(InvalidArgument, r"inside transaction\.atomic\(\)"):
            txq.batch()

    def test_queue_ddl_after_uncommitted_changes_is_refused(self) -> None:
        operation = UpdateDdl(
            forward=[
                "CREATE QUEUE Late (Id INT64 NOT NULL,"
                " Payload BYTES(MAX) NOT NULL) PRIMARY KEY (Id)"
            ]
        )
        editor = SimpleNamespace(connection=connections["default"], collect_sql=False)
        refused = self.assertRaisesRegex(FailedPrecondition, "put UpdateDdl first in its migration")
        with refused, transaction.atomic():
            Order.objects.create(email="early@example.com")  # a change of this transaction
            operation.database_forwards("shop", editor, None, None)
        with self.assertRaises(txqueue.errors.NotFound):
            txq.database().queue_info("Late")

    @override_settings(TXQUEUE={"DIALECT": "googlesql", "USNIG": "default"})
    def test_unknown_setting_is_named(self) -> None:
        with self.assertRaisesRegex(InvalidArgument, r"unknown keys \['USNIG'\]"):
            txq.database()
        self.assertEqual([error.id for error in check_settings()], ["txqueue.E001"])

    def test_migration_drops_and_recreates_the_queue(self) -> None:
        quiet = io.StringIO()
        call_command("migrate", "shop", "0001", stdout=quiet)
        with self.assertRaises(txqueue.errors.NotFound):
            txq.database().queue_info("OrderEmails")
        call_command("migrate", "shop", stdout=quiet)
        self.assertEqual(txq.database().queue_info("OrderEmails").name, "OrderEmails")

    def test_manage_py_txqueue_worker(self) -> None:
        worker = manage("txqueue", "worker", "shop.tasks:app", "--no-status")
        try:
            Client().post(
                "/orders", json.dumps({"email": "di@example.com"}), content_type="application/json"
            )
            line = ""
            while "order email sent" not in line:
                line = worker.stdout.readline() if worker.stdout else ""
                self.assertTrue(line, "the worker exited before sending the email")
            self.assertIn("di@example.com", line)
            self.assertIsNotNone(Order.objects.get().emailed_at)  # the handler's ORM write
        finally:
            worker.send_signal(signal.SIGINT)
            output, _ = worker.communicate(timeout=30)
        self.assertEqual(worker.returncode, 0, output)

    def test_manage_py_txqueue_dashboard_shows_django_database(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        token = "a-long-random-token-for-the-shop-tests"
        dashboard = manage("txqueue", "dashboard", "--port", str(port), "--token", token)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    answer = httpx.get(
                        f"http://127.0.0.1:{port}/api/v1/queues",
                        headers={"Authorization": f"Bearer {token}"},
                    )
                    break
                except httpx.TransportError:
                    self.assertIsNone(dashboard.poll(), "the dashboard exited")
                    self.assertLess(time.monotonic(), deadline, "the dashboard did not listen")
                    time.sleep(0.1)
            self.assertEqual(answer.status_code, 200, answer.text)
            self.assertIn("OrderEmails", answer.text)
        finally:
            dashboard.send_signal(signal.SIGINT)
            dashboard.communicate(timeout=30)

    def test_manage_py_txqueue_passes_the_help_through(self) -> None:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            call_command("txqueue", "dispatcher", "--help")
        self.assertIn("Usage: manage.py txqueue dispatcher", printed.getvalue())
