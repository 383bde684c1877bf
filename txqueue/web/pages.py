"""The dashboard's HTML pages, their htmx fragments and the handlers of their forms.

Every page reads through `txqueue.web.services` (one call per table, so a page costs the same
with a thousand messages or a million) and renders a Jinja2 template with autoescape on:
payloads, keys, errors and CEL are always text, never markup. Forms are plain HTML: they POST
with the hidden ``csrf_token`` field and answer 303 back to the page with a status flag in the
query (``?done=replayed&count=3``), so they work without JavaScript; htmx only refreshes the
overview's table. Database work runs in Starlette's threadpool (the sync face).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from txqueue.core.schema import Table
from txqueue.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    TxqueueError,
)
from txqueue.web import display, services
from txqueue.web.api_messages import payload_from_text, time_from_text

if TYPE_CHECKING:
    from txqueue.web.app import WebState

__all__ = ["routes"]

#: How many undelivered messages the page lists (each with its attempt log).
UNDELIVERED_LIMIT = 200

_DONE = {
    "replayed": "Replayed {count} dead letter{s} to the queue.",
    "purged": "Purged {count} dead letter{s}.",
    "saved": "Saved the pipeline.",
    "republished": "Replayed {count} undelivered message{s} (each under a new message UID).",
    "paused": "Paused the queue: it takes sends, and nothing leases from it until resumed.",
    "resumed": "Resumed the queue.",
    "deleted": "Deleted {count} message{s}.",
    "ready": "The message is ready now.",
    "sent": "Sent the message.",
}
_PAGE_ERRORS = (TxqueueError,)


def _key_writer(table: Table) -> Callable[[tuple[Any, ...]], str]:
    def key_json(key: tuple[Any, ...]) -> str:
        return json.dumps(services.key_to_json(table, key), ensure_ascii=False)

    return key_json


# ---- request state ----------------------------------------------------------------------------


def web_state(request: Request) -> WebState:
    """The dashboard's shared state (`txqueue.web.app` imports this module, so not from there)."""
    state: WebState = request.app.state.txqueue
    return state


def base_path_of(request: Request) -> str:
    """Where the dashboard is served ("" at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


# ---- rendering --------------------------------------------------------------------------------


def _render(
    request: Request,
    template: str,
    context: dict[str, Any],
    status_code: int = 200,
) -> Response:
    state = web_state(request)
    done = request.query_params.get("done")
    status_message = None
    if done in _DONE:
        count = request.query_params.get("count", "")
        number = int(count) if count.isdigit() else 0
        status_message = _DONE[done].format(count=number, s="" if number == 1 else "s")
    full = {
        "section": "overview",
        "status_message": status_message,
        "error_message": None,
        "logged_in": state.token is not None,
        "age": display.age,
        "duration": display.duration,
        "seconds_since": display.seconds_since,
        "utc": display.utc,
        "preview": display.preview,
        **context,
    }
    return state.templates.TemplateResponse(request, template, full, status_code=status_code)


def _error_page(request: Request, error: TxqueueError) -> Response:
    status = 404 if isinstance(error, NotFound) else 400
    if not isinstance(error, (NotFound, InvalidArgument)):
        from txqueue.web.api import STATUS_OF

        status = next((code for kind, code in STATUS_OF.items() if isinstance(error, kind)), 500)
    title = {404: "Not found", 400: "That cannot be shown"}.get(status, "Something went wrong")
    return _render(
        request, "error.html", {"title": title, "error_message": str(error)}, status_code=status
    )


def _page(handler: Callable[[Request, WebState], Response]) -> Callable[[Request], Any]:
    """A GET page: runs ``handler`` in the threadpool; txqueue errors become an HTML page."""

    async def endpoint(request: Request) -> Response:
        def run() -> Response:
            try:
                return handler(request, web_state(request))
            except _PAGE_ERRORS as error:
                return _error_page(request, error)

        return await run_in_threadpool(run)

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


def _action(
    handler: Callable[[Request, WebState, FormData], Response],
) -> Callable[[Request], Any]:
    """A form's POST: reads the form, then runs ``handler`` in the threadpool."""

    async def endpoint(request: Request) -> Response:
        form = await request.form()

        def run() -> Response:
            try:
                return handler(request, web_state(request), form)
            except _PAGE_ERRORS as error:
                return _error_page(request, error)

        return await run_in_threadpool(run)

    endpoint.__name__ = handler.__name__
    endpoint.__doc__ = handler.__doc__
    return endpoint


def _back(request: Request, path: str, **flags: Any) -> RedirectResponse:
    """303 back to ``path`` (inside the dashboard) with the status flags in the query."""
    query = f"?{urlencode(flags)}" if flags else ""
    return RedirectResponse(base_path_of(request) + path + query, status_code=303)


def _queue_path(name: str) -> str:
    return "/queues/" + quote(name, safe="")


# ---- overview ---------------------------------------------------------------------------------


def _overview(state: WebState) -> dict[str, Any]:
    """The overview table's context: every queue's counts, and its handled / failed totals of
    the last hour by queue name."""
    return {
        "queues": services.overview(state.database),
        "totals": services.throughput_totals(state.database),
    }


def overview_page(request: Request, state: WebState) -> Response:
    """Every queue with its counts, and the last hour's throughput chart."""
    return _render(request, "overview.html", _overview(state))


def queues_fragment(request: Request, state: WebState) -> Response:
    """The overview table's rows, for htmx polling."""
    return _render(request, "fragments/queues.html", _overview(state))


def throughput_data(request: Request, state: WebState) -> Response:
    """The throughput chart's data: minutes (Unix seconds) and a series per outcome."""
    series = services.throughput(state.database)
    active = any(series.handled) or any(series.failed) or any(series.dead_lettered)
    body = {
        "minutes": [int(minute.timestamp()) for minute in series.minutes] if active else [],
        "series": [
            {"name": "handled", "label": "handled", "values": series.handled},
            {"name": "failed", "label": "failed", "values": series.failed},
            {"name": "dead_lettered", "label": "dead-lettered", "values": series.dead_lettered},
        ],
    }
    return JSONResponse(body)


# ---- queue browser and message detail ---------------------------------------------------------


def queue_page(request: Request, state: WebState) -> Response:
    """One page of a queue's messages in key order, filtered by key prefix and state."""
    name = request.path_params["name"]
    table = state.database.queue(name)
    prefix_text = request.query_params.get("prefix", "")
    state_filter = request.query_params.get("state", "")
    after_text = request.query_params.get("after", "")
    key_json = _key_writer(table)
    context: dict[str, Any] = {
        "queue": table.name,
        "paused": state.database.queue_info(table.name, estimate=True).paused,
        "prefix": prefix_text,
        "state": state_filter,
        "after": after_text,
        "key_json": key_json,
        "messages": [],
        "next_after": None,
    }

    def page_query(after: tuple[Any, ...] | None = None) -> str:
        flags = {"prefix": prefix_text, "state": state_filter}
        if after is not None:
            flags["after"] = key_json(after)
        return urlencode({field: value for field, value in flags.items() if value})

    context["page_query"] = page_query
    try:
        page = services.queue_page(
            state.database,
            table.name,
            prefix=services.parse_prefix(table, prefix_text),
            state=state_filter or None,
            after=services.parse_key(table, after_text, "after") if after_text else None,
        )
    except InvalidArgument as error:
        context["error_message"] = str(error)
        return _render(request, "queue.html", context, status_code=400)
    context["messages"] = page.messages
    context["next_after"] = page.next_after
    return _render(request, "queue.html", context)


def pause_action(request: Request, state: WebState, form: FormData) -> Response:
    """Pause the queue: it takes sends, and nothing leases from it until resumed."""
    table = state.database.queue(request.path_params["name"])
    state.database.pause_queue(table.name)
    return _back(request, _queue_path(table.name), done="paused")


def resume_action(request: Request, state: WebState, form: FormData) -> Response:
    """Resume the queue."""
    table = state.database.queue(request.path_params["name"])
    state.database.resume_queue(table.name)
    return _back(request, _queue_path(table.name), done="resumed")


def message_page(request: Request, state: WebState) -> Response:
    """One message: its fields and its payload as JSON, text or hex."""
    name = request.path_params["name"]
    table = state.database.queue(name)
    key = services.parse_key(table, request.query_params.get("key", ""))
    context = _message_context(request, state, table, key)
    return _render(request, "message.html", context)


def _message_context(
    request: Request, state: WebState, table: Table, key: tuple[Any, ...]
) -> dict[str, Any]:
    found = services.message(state.database, table.name, key)
    shown = display.payload_view(found.payload, request.query_params.get("view"))
    return {
        "queue": table.name,
        "key": _key_writer(table)(found.key),
        "message": found,
        "view": shown.view,
        "view_note": shown.note,
        "payload_text": shown.text,
        "payload_kind": shown.kind,
        "payload_size": shown.size,
    }


def message_action(request: Request, state: WebState, form: FormData) -> Response:
    """Delete the message (after a confirmation step) or make it ready now. A message under a
    live lease is refused unless the form's ``force`` box is ticked."""
    table = state.database.queue(request.path_params["name"])
    key_text = form.get("key")
    key = services.parse_key(table, key_text if isinstance(key_text, str) else "")
    force = form.get("force") == "1"
    action = form.get("action")
    try:
        if action == "delete":
            found = services.message(state.database, table.name, key)
            context = {"queue": table.name, "key": _key_writer(table)(key), "message": found}
            return _render(request, "confirm_delete.html", context)
        if action == "confirm-delete":
            count = state.database.delete_messages(table.name, [key], force=force)
            return _back(request, _queue_path(table.name), done="deleted", count=count)
        if action == "ready":
            state.database.make_ready(table.name, [key], force=force)
            path = (
                _queue_path(table.name) + "/message?" + urlencode({"key": _key_writer(table)(key)})
            )
            return RedirectResponse(base_path_of(request) + path + "&done=ready", status_code=303)
        raise InvalidArgument(f"action must be delete, confirm-delete or ready, got {action!r}")
    except (InvalidArgument, FailedPrecondition) as error:
        context = _message_context(request, state, table, key)
        context.update(error_message=str(error), offer_force=isinstance(error, FailedPrecondition))
        return _render(request, "message.html", context, status_code=_status_of(error))


def send_action(request: Request, state: WebState, form: FormData) -> Response:
    """Send a message from the queue page's form: key (JSON), payload text (JSON for a JSON
    payload column), deliver time (RFC 3339, optional)."""
    table = state.database.queue(request.path_params["name"])
    given = {
        field: value if isinstance(value := form.get(field), str) else ""
        for field in ("key", "payload", "deliver_time")
    }
    try:
        key = services.parse_key(table, given["key"])
        payload = payload_from_text(table, given["payload"])
        when = time_from_text(given["deliver_time"], "deliver_time")
        with state.database.batch() as batch:
            batch.send(table.name, key, payload, deliver_time=when)
    except (InvalidArgument, AlreadyExists) as error:
        return _error_page(request, error)
    return _back(request, _queue_path(table.name), done="sent")


def _status_of(error: TxqueueError) -> int:
    from txqueue.web.api import STATUS_OF

    return next((code for kind, code in STATUS_OF.items() if isinstance(error, kind)), 500)


# ---- dead letters -----------------------------------------------------------------------------


def _dead_letters_context(state: WebState, table: Table) -> dict[str, Any]:
    letters = services.dead_letters(state.database, table.name)
    return {
        "queue": table.name,
        "dead_letters": letters,
        "truncated": len(letters) >= services.MAX_PAGE_SIZE,
        "key_json": _key_writer(table),
    }


def dead_letters_page(request: Request, state: WebState) -> Response:
    """A queue's dead letters, with replay and purge."""
    table = state.database.queue(request.path_params["name"])
    return _render(request, "dead_letters.html", _dead_letters_context(state, table))


def dead_letters_action(request: Request, state: WebState, form: FormData) -> Response:
    """Replay one, the selected or all dead letters; purge all after a confirmation step."""
    table = state.database.queue(request.path_params["name"])
    path = _queue_path(table.name) + "/dead-letters"
    one = form.get("replay_one")
    action = form.get("action")
    try:
        if isinstance(one, str) and one:
            key = services.parse_key(table, one)
            count = services.replay_dead_letters(state.database, table.name, [key])
            return _back(request, path, done="replayed", count=count)
        if action == "replay-selected":
            chosen = [value for value in form.getlist("key") if isinstance(value, str)]
            if not chosen:
                raise InvalidArgument("select at least one dead letter to replay")
            keys = [services.parse_key(table, value) for value in chosen]
            count = services.replay_dead_letters(state.database, table.name, keys)
            return _back(request, path, done="replayed", count=count)
        if action == "replay-all":
            count = services.replay_dead_letters(state.database, table.name, None)
            return _back(request, path, done="replayed", count=count)
        if action == "purge-all":
            letters = services.dead_letters(state.database, table.name)
            context = {"queue": table.name, "count": len(letters)}
            return _render(request, "confirm_purge.html", context)
        if action == "confirm-purge":
            count = services.purge_dead_letters(state.database, table.name, None)
            return _back(request, path, done="purged", count=count)
        raise InvalidArgument(
            f"action must be replay-selected, replay-all or purge-all, got {action!r}"
        )
    except InvalidArgument as error:
        context = _dead_letters_context(state, table)
        context["error_message"] = str(error)
        return _render(request, "dead_letters.html", context, status_code=400)


# ---- workers ----------------------------------------------------------------------------------


def workers_page(request: Request, state: WebState) -> Response:
    """The live workers."""
    context = {"section": "workers", "workers": services.workers(state.database)}
    return _render(request, "workers.html", context)


# ---- events -----------------------------------------------------------------------------------


def events_page(request: Request, state: WebState) -> Response:
    """Buses, pipelines and enrollments."""
    events = state.events
    context = {
        "section": "events",
        "buses": services.buses(events),
        "pipelines": services.pipelines(events),
        "enrollments": services.enrollments(events),
        "unmatched": services.unmatched_counts(events),
    }
    return _render(request, "events.html", context)


def _pipeline_form(row: services.PipelineRow) -> dict[str, str]:
    return {
        "destination": row.destination,
        "max_attempts": str(row.max_attempts),
        "min_retry_delay": f"{row.min_retry_delay.total_seconds():g}",
        "max_retry_delay": f"{row.max_retry_delay.total_seconds():g}",
    }


def pipeline_page(request: Request, state: WebState) -> Response:
    """One pipeline, with the form that edits its destination and retry policy."""
    row = services.pipeline_row(state.events.get_pipeline(request.path_params["name"]))
    context = {"section": "events", "pipeline": row, "form": _pipeline_form(row)}
    return _render(request, "pipeline.html", context)


def pipeline_action(request: Request, state: WebState, form: FormData) -> Response:
    """Save the pipeline form; an invalid value shows the library's error and saves nothing."""
    events = state.events
    row = services.pipeline_row(events.get_pipeline(request.path_params["name"]))
    given = {
        field: value if isinstance(value := form.get(field), str) else ""
        for field in ("destination", "max_attempts", "min_retry_delay", "max_retry_delay")
    }
    try:
        services.update_pipeline(
            events,
            row.name,
            destination=given["destination"],
            max_attempts=given["max_attempts"],
            min_retry_delay=given["min_retry_delay"],
            max_retry_delay=given["max_retry_delay"],
        )
    except InvalidArgument as error:
        context = {
            "section": "events",
            "pipeline": row,
            "form": given,
            "error_message": str(error),
        }
        return _render(request, "pipeline.html", context, status_code=400)
    return _back(request, "/events/pipelines/" + quote(row.name, safe=""), done="saved")


def undelivered_page(request: Request, state: WebState) -> Response:
    """Messages a pipeline gave up on, each with its attempt log."""
    rows = services.undelivered(state.events, limit=UNDELIVERED_LIMIT)
    context = {"section": "events", "undelivered": rows, "limit": UNDELIVERED_LIMIT}
    return _render(request, "undelivered.html", context)


def undelivered_action(request: Request, state: WebState, form: FormData) -> Response:
    """Replay one undelivered message (by message UID), or all of them."""
    uid = form.get("message_uid")
    try:
        if form.get("action") == "replay-all":
            uids = None
        elif isinstance(uid, str) and uid:
            uids = [uid]
        else:
            raise InvalidArgument("message_uid must name the message to replay")
        replayed = services.replay_undelivered(state.events, uids)
    except InvalidArgument as error:
        rows = services.undelivered(state.events, limit=UNDELIVERED_LIMIT)
        context = {
            "section": "events",
            "undelivered": rows,
            "limit": UNDELIVERED_LIMIT,
            "error_message": str(error),
        }
        return _render(request, "undelivered.html", context, status_code=400)
    return _back(request, "/events/undelivered", done="republished", count=len(replayed))


def routes() -> list[BaseRoute]:
    """The page routes, relative to the base path."""
    return [
        Route("/", _page(overview_page), name="overview"),
        Route("/fragments/queues", _page(queues_fragment), name="queues_fragment"),
        Route("/fragments/throughput.json", _page(throughput_data), name="throughput_data"),
        Route("/workers", _page(workers_page), name="workers"),
        Route("/events", _page(events_page), name="events"),
        Route("/events/undelivered", _page(undelivered_page), name="undelivered"),
        Route(
            "/events/undelivered",
            _action(undelivered_action),
            methods=["POST"],
            name="undelivered_action",
        ),
        Route("/events/pipelines/{name}", _page(pipeline_page), name="pipeline"),
        Route(
            "/events/pipelines/{name}",
            _action(pipeline_action),
            methods=["POST"],
            name="pipeline_action",
        ),
        Route("/queues/{name}", _page(queue_page), name="queue"),
        Route("/queues/{name}/pause", _action(pause_action), methods=["POST"], name="pause"),
        Route("/queues/{name}/resume", _action(resume_action), methods=["POST"], name="resume"),
        Route("/queues/{name}/message", _page(message_page), name="message"),
        Route(
            "/queues/{name}/message",
            _action(message_action),
            methods=["POST"],
            name="message_action",
        ),
        Route("/queues/{name}/send", _action(send_action), methods=["POST"], name="send"),
        Route("/queues/{name}/dead-letters", _page(dead_letters_page), name="dead_letters"),
        Route(
            "/queues/{name}/dead-letters",
            _action(dead_letters_action),
            methods=["POST"],
            name="dead_letters_action",
        ),
    ]
