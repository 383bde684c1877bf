"""The contract between a face and a driver, in one place: both faces' protocols and the
parameter objects every operation takes.

The asyncio protocols are written in ``_async_protocol``; the sync ones in
``_sync_protocol`` are generated from it. Both live here, below the faces, so that a driver
needs nothing from a face.
"""

from __future__ import annotations

from txqueue.drivers._async_protocol import AsyncDriver, AsyncDriverTransaction, AsyncReceiver
from txqueue.drivers._sync_protocol import Driver, DriverTransaction, Receiver
from txqueue.drivers.base import (
    AckParams,
    BrowseParams,
    DeadLetterParams,
    DeleteMessagesParams,
    DeleteParams,
    MakeReadyParams,
    PauseParams,
    ReceiveParams,
    ReleaseParams,
    RenewParams,
    SendParams,
    WriteKind,
    WriteParams,
)

__all__ = [
    "AckParams",
    "AsyncDriver",
    "AsyncDriverTransaction",
    "AsyncReceiver",
    "BrowseParams",
    "DeadLetterParams",
    "DeleteMessagesParams",
    "DeleteParams",
    "Driver",
    "DriverTransaction",
    "MakeReadyParams",
    "PauseParams",
    "ReceiveParams",
    "Receiver",
    "ReleaseParams",
    "RenewParams",
    "SendParams",
    "WriteKind",
    "WriteParams",
]
