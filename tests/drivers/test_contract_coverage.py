"""The suite keeps up with the contract: every operation of the driver protocol is called by
some test here, so an operation added to the protocol without a driver-level test fails."""

from __future__ import annotations

import inspect
from pathlib import Path

from txqueue.drivers.protocol import AsyncDriver, AsyncDriverTransaction, AsyncReceiver

HERE = Path(__file__).parent


def _operations(protocol: type) -> set[str]:
    return {
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_every_protocol_operation_is_exercised() -> None:
    sources = "\n".join(
        path.read_text() for path in HERE.glob("*.py") if path.name != Path(__file__).name
    )
    operations = (
        _operations(AsyncDriver) | _operations(AsyncDriverTransaction) | _operations(AsyncReceiver)
    )
    assert len(operations) > 20
    untested = sorted(name for name in operations if f".{name}(" not in sources)
    assert untested == [], f"driver operations without a driver-level test: {untested}"
