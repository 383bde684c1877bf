"""OpenTelemetry traces, metrics and log correlation, when ``opentelemetry-api`` is installed.

One module the faces, the worker and the event layer call: they never import OpenTelemetry
themselves. Without the API (``pip install 'txqueue[otel]'``), or with it but no SDK
TracerProvider configured, every entry point returns None after one cheap check and nothing
is created per message: no span, no attribute dict, no context. The API is not even imported
until the application has imported it (setting up an SDK does).

Spans follow OpenTelemetry's messaging conventions (``messaging.system`` = ``"txqueue"``):
``send`` (PRODUCER) where a message is sent, ``process`` (CONSUMER) around each handler run,
a child of the sender's context, which the message carries in a hidden column; settling (ack,
retry, dead letter) and lease renewals are events of the process span. The event layer adds
``publish`` (PRODUCER) and one CLIENT span per HTTP delivery attempt, whose context travels
to the receiver as ``ce-traceparent``. docs/observability.md lists every span and metric.

The modules, by subject: `_providers` (whether anything records: the API imported once, the
tracer and the meter), `_context` (trace context carried by messages, and on log records),
`_messages` (send, receive, process and settle), `_events` (publish and HTTP deliveries),
`_metrics` (the OpenTelemetry twins of the worker's metrics). The entry points are imported
from here.
"""

from __future__ import annotations

from txqueue.telemetry._context import OWN as OWN
from txqueue.telemetry._context import TraceIds
from txqueue.telemetry._context import carried as carried
from txqueue.telemetry._context import remember as remember
from txqueue.telemetry._context import renewed as renewed
from txqueue.telemetry._context import resending as resending
from txqueue.telemetry._events import consuming as consuming
from txqueue.telemetry._events import end_delivery as end_delivery
from txqueue.telemetry._events import headers_context as headers_context
from txqueue.telemetry._events import start_delivery as start_delivery
from txqueue.telemetry._events import start_publish as start_publish
from txqueue.telemetry._messages import abandoned as abandoned
from txqueue.telemetry._messages import current as current
from txqueue.telemetry._messages import ending as ending
from txqueue.telemetry._messages import handler_failed as handler_failed
from txqueue.telemetry._messages import lease_renewed as lease_renewed
from txqueue.telemetry._messages import receive_started as receive_started
from txqueue.telemetry._messages import received as received
from txqueue.telemetry._messages import sent_context as sent_context
from txqueue.telemetry._messages import settled as settled
from txqueue.telemetry._messages import start_process as start_process
from txqueue.telemetry._messages import start_send as start_send
from txqueue.telemetry._metrics import WorkerMetrics as WorkerMetrics
from txqueue.telemetry._metrics import worker_metrics as worker_metrics
from txqueue.telemetry._providers import SCOPE as SCOPE
from txqueue.telemetry._providers import configure, tracer
from txqueue.telemetry._providers import meter as meter

__all__ = ["TraceIds", "configure", "tracer"]
