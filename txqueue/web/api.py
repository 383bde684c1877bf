"""The HTTP API under ``/api/v1`` (JSON), and its OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from txqueue import errors

__all__ = ["STATUS_OF", "exception_handlers", "routes"]

#: The HTTP status of each txqueue error.
STATUS_OF: dict[type[errors.TxqueueError], int] = {
    errors.InvalidArgument: 400,
    errors.NotFound: 404,
    errors.AlreadyExists: 409,
    errors.FailedPrecondition: 412,
    errors.OutOfRange: 400,
    errors.Aborted: 409,
    errors.DeadlineExceeded: 504,
    errors.Unavailable: 503,
    errors.CommitOutcomeUnknown: 500,
}


def error_response(error: errors.TxqueueError) -> JSONResponse:
    """``{"error": {"code", "message"}}`` with the status of the error's class."""
    status = next((code for kind, code in STATUS_OF.items() if isinstance(error, kind)), 500)
    body = {"error": {"code": type(error).__name__, "message": str(error)}}
    return JSONResponse(body, status_code=status)


async def _handle(request: Request, error: Exception) -> Response:
    if isinstance(error, errors.TxqueueError):
        return error_response(error)
    raise error


def exception_handlers() -> dict[Any, Callable[..., Any]]:
    """txqueue errors raised by any route become JSON error responses."""
    return {errors.TxqueueError: _handle}


def routes() -> list[BaseRoute]:
    """The API's routes, relative to ``/api/v1``."""
    return []
