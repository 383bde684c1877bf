"""The event layer's public names: exported from txqueue, imported only on first use."""

from __future__ import annotations

import subprocess
import sys

import txqueue

EVENT_NAMES = [
    "ArchivedMessage",
    "AsyncDispatcher",
    "AsyncEvents",
    "Bus",
    "DeliveryAttempt",
    "Dispatcher",
    "Enrollment",
    "Events",
    "Pipeline",
    "UndeliveredMessage",
    "verify_signature",
]


def test_event_names_are_exported_and_resolve() -> None:
    for name in EVENT_NAMES:
        assert name in txqueue.__all__
        assert getattr(txqueue, name) is not None
    assert txqueue.__all__ == sorted(txqueue.__all__)


def test_importing_txqueue_does_not_import_the_event_layer() -> None:
    code = "import sys, txqueue; print(any(m.startswith('txqueue.events') for m in sys.modules))"
    output = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "False"
