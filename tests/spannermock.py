"""The google-cloud-spanner client's own gRPC mock server, for RPC-level tests of the driver.

``google.cloud.spanner_v1.testing.mock_spanner`` answers every Spanner RPC in memory and
records each request; ``MockServer`` runs it on a free port of 127.0.0.1 (the client finds it
through ``SPANNER_EMULATOR_HOST``) with two additions the commit-outcome tests need:

- ``txqueue_commits`` is kept: a Commit applies its inserts into that table (and answers
  ALREADY_EXISTS, applying nothing, for an id already there), and the resolver's read of a
  marker (``SELECT resolved FROM txqueue_commits WHERE id = @id``) is answered from it;
- ``fail_commits((code, applied), ...)`` makes the next Commits end with ``code``, either
  before they apply (the mock's own ``add_error``) or after (mutations applied, reply lost).

``down_after_commit`` makes every RPC after the next Commit fail with DEADLINE_EXCEEDED (a
database that cannot be reached any more).
Any other query must be given its result with ``servicer.mock_spanner.add_result``.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

pytest.importorskip("google.cloud.spanner_v1.testing.mock_spanner")

import google.cloud.spanner_v1.testing.spanner_database_admin_pb2_grpc as admin_grpc
import google.cloud.spanner_v1.testing.spanner_pb2_grpc as spanner_grpc
from google.cloud.spanner_v1 import Mutation, TypeCode
from google.cloud.spanner_v1.testing.mock_database_admin import DatabaseAdminServicer
from google.cloud.spanner_v1.testing.mock_spanner import SpannerServicer
from google.cloud.spanner_v1.types import result_set
from grpc_status.rpc_status import _Status

__all__ = ["MARKER_READ", "MockServer", "inserts", "status"]

PROJECT = "txqueue-test"
TARGET = f"projects/{PROJECT}/instances/mock/databases/mock"
#: The resolver's read of a marker, after an unknown outcome of its own commit.
MARKER_READ = "SELECT resolved FROM txqueue_commits WHERE id = @id"


def status(code: grpc.StatusCode, message: str = "injected by the test") -> _Status:
    """A gRPC status for ``add_error`` / ``abort_with_status``."""
    return _Status(code=code, details=message, trailing_metadata=())


def inserts(mutations: Any, table: str) -> list[tuple[list[str], list[Any]]]:
    """The (columns, values) of every row ``mutations`` insert into ``table``."""
    found = []
    for mutation in mutations:
        if Mutation.pb(mutation).WhichOneof("operation") != "insert":
            continue
        write = mutation.insert
        if write.table != table:
            continue
        for row in write.values:
            found.append((list(write.columns), list(row)))
    return found


class _Servicer(SpannerServicer):  # type: ignore[misc]
    """The client's mock, with ``txqueue_commits`` kept and faults at Commit."""

    def __init__(self) -> None:
        super().__init__()
        self.markers: dict[str, bool] = {}  # id -> resolved
        #: per later Commit, in order: None (answered) or (code, applied)
        self.faults: list[tuple[grpc.StatusCode, bool] | None] = []
        self.unreachable: grpc.StatusCode | None = None
        self.down_after_commit = False

    def _check_reachable(self, context: Any) -> None:
        if self.unreachable is not None:
            context.abort(self.unreachable, "the database cannot be reached (test)")

    def CreateSession(self, request: Any, context: Any) -> Any:
        self._check_reachable(context)
        return super().CreateSession(request, context)

    def BeginTransaction(self, request: Any, context: Any) -> Any:
        self._check_reachable(context)
        return super().BeginTransaction(request, context)

    def ExecuteStreamingSql(self, request: Any, context: Any) -> Iterator[Any]:
        self._check_reachable(context)
        if request.sql == MARKER_READ:
            self._requests.append(request)
            self.mock_spanner.pop_error(context)
            marker = request.params["id"]
            partial = result_set.PartialResultSet(
                metadata=result_set.ResultSetMetadata(
                    row_type={"fields": [{"name": "resolved", "type_": {"code": TypeCode.BOOL}}]}
                )
            )
            if marker in self.markers:
                partial.values.extend([self.markers[marker]])
            yield partial
            return
        yield from super().ExecuteStreamingSql(request, context)

    def Commit(self, request: Any, context: Any) -> Any:
        self._check_reachable(context)
        pending = {
            values[0]: "resolved" in columns and bool(values[columns.index("resolved")])
            for columns, values in inserts(request.mutations, "txqueue_commits")
        }
        fault = self.faults.pop(0) if self.faults else None
        if self.down_after_commit:
            self.unreachable = grpc.StatusCode.DEADLINE_EXCEEDED
        if fault is not None and not fault[1]:  # the mock's own error: raised before applying
            self.mock_spanner.add_error("Commit", status(fault[0], "the commit failed (test)"))
            return super().Commit(request, context)
        taken = [marker for marker in pending if marker in self.markers]
        if taken:
            self._requests.append(request)
            context.abort_with_status(status(grpc.StatusCode.ALREADY_EXISTS, f"Row {taken}"))
        reply = super().Commit(request, context)
        self.markers.update(pending)
        if fault is not None:
            context.abort(fault[0], "the commit's reply was lost (test)")
        return reply


class MockServer:
    """One running mock server: ``servicer.requests`` holds every request it received."""

    def __init__(self) -> None:
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=10))
        self.servicer = _Servicer()
        self.admin = DatabaseAdminServicer()
        spanner_grpc.add_SpannerServicer_to_server(self.servicer, self.server)
        admin_grpc.add_DatabaseAdminServicer_to_server(self.admin, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.host = f"127.0.0.1:{self.port}"
        self.server.start()

    def fail_commits(self, *faults: tuple[grpc.StatusCode, bool] | None) -> None:
        """The next Commits, in order: answered (None), or ending with (code, applied): after
        applying their mutations (the reply lost) or before applying anything."""
        self.servicer.faults.extend(faults)

    def requests(self, kind: str) -> list[Any]:
        """The recorded requests of one type (``"CommitRequest"``, ``"ExecuteSqlRequest"``)."""
        return [r for r in self.servicer.requests if type(r).__name__ == kind]

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture
def spanner_mock(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockServer]:
    """A mock Spanner server the client talks to (``SPANNER_EMULATOR_HOST``)."""
    server = MockServer()
    monkeypatch.setenv("SPANNER_EMULATOR_HOST", server.host)
    try:
        yield server
    finally:
        server.stop()
