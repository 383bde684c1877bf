"""A loopback gRPC proxy in front of the Cloud Spanner emulator that loses a Commit, on request.

The client talks to the proxy (``SPANNER_EMULATOR_HOST`` set to ``proxy.host``); every call
is forwarded as raw bytes to the emulator with its metadata, and the emulator's status comes
back unchanged. ``arm(mode, code)`` makes the next Commit end with ``code`` at the client:

``after``   the Commit is forwarded and applied by the emulator, then its reply is dropped
            (a connection lost after the Commit was sent);
``before``  the Commit is never forwarded (lost on the way: nothing applied).

A byte-level TCP proxy cannot tell a Commit in HTTP/2's compressed headers; at the gRPC
level the method is plain. Every drop is recorded in ``drops`` as (mode, method).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc

__all__ = ["CommitFaultProxy"]

#: The Spanner methods that stream their answers; every other one is unary.
_STREAMING = {"ExecuteStreamingSql", "StreamingRead", "BatchWrite", "ReadPartitionedChanges"}


class CommitFaultProxy(grpc.GenericRpcHandler):
    """Forward every call to ``upstream``; lose the next Commit when armed."""

    def __init__(self, upstream: str) -> None:
        self._channel = grpc.insecure_channel(upstream)
        self._lock = threading.Lock()
        self._armed: tuple[str, grpc.StatusCode] | None = None
        self.drops: list[tuple[str, str]] = []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        self._server.add_generic_rpc_handlers((self,))
        self.host = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    def start(self) -> CommitFaultProxy:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop(None)
        self._channel.close()

    def arm(self, mode: str, code: grpc.StatusCode) -> None:
        """The next Commit ends with ``code``: applied first (``after``) or not (``before``)."""
        if mode not in ("after", "before"):
            raise ValueError(f"mode must be 'after' or 'before', got {mode!r}")
        with self._lock:
            self._armed = (mode, code)

    def _take(self, method: str) -> tuple[str, grpc.StatusCode] | None:
        if not method.endswith("/Commit"):
            return None
        with self._lock:
            armed, self._armed = self._armed, None
        return armed

    def service(self, handler_call_details: Any) -> Any:
        method: str = handler_call_details.method
        if method.rsplit("/", 1)[-1] in _STREAMING:
            stream = self._channel.unary_stream(method)

            def forward_stream(request: bytes, context: Any) -> Iterator[bytes]:
                try:
                    yield from stream(request, metadata=_metadata(context))
                except grpc.RpcError as error:
                    context.abort(error.code(), error.details())

            return grpc.unary_stream_rpc_method_handler(forward_stream)
        call = self._channel.unary_unary(method)

        def forward(request: bytes, context: Any) -> bytes:
            armed = self._take(method)
            if armed is not None and armed[0] == "before":
                self.drops.append(("before", method))
                context.abort(armed[1], "proxy: the connection was lost before the Commit")
            try:
                reply: bytes = call(request, metadata=_metadata(context))
            except grpc.RpcError as error:
                context.abort(error.code(), error.details())
            if armed is not None:
                self.drops.append(("after", method))
                context.abort(armed[1], "proxy: the connection was lost after the Commit")
            return reply

        return grpc.unary_unary_rpc_method_handler(forward)


def _metadata(context: Any) -> list[tuple[str, str | bytes]]:
    """The caller's metadata, without the HTTP/2 pseudo-headers gRPC sets itself."""
    return [(k, v) for k, v in context.invocation_metadata() if not k.startswith(":")]
