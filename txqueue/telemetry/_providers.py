"""Whether anything records: the OpenTelemetry API imported once, and the tracer and meter of
the configured (or global) providers, looked up cheaply.

The rest of `txqueue.telemetry` asks `tracer()` or `meter()` first and does nothing more when
either is None; `api` is the imported API once one of them was not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from time import monotonic
from typing import Any, TypeVar

__all__ = ["RECHECK", "SCOPE", "configure", "instruments", "load", "meter", "tracer"]

_Made = TypeVar("_Made")

#: Instrumentation scope of every span and metric.
SCOPE = "txqueue"

api: Any = None  # the imported opentelemetry namespace (`_Api`); False when not installed
_tracer: Any = None
_meter: Any = None
_instruments: Any = None  # the metric instruments made on `_meter` (see `instruments`)
_tracer_provider: Any = None  # set by configure(): used instead of the global provider
_meter_provider: Any = None
#: Seconds between looks at the global tracer provider while none is configured.
RECHECK = 1.0
_next_check = 0.0  # monotonic time of the next look


class _Api:
    """The parts of opentelemetry-api txqueue uses, imported once."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.context = context
        self.metrics = metrics
        self.trace = trace
        self.propagator = TraceContextTextMapPropagator()
        self.no_tracer = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)

    def records_metrics(self, provider: Any) -> bool:
        """False for the API's own providers (no SDK configured): they record nothing."""
        if isinstance(provider, self.metrics.NoOpMeterProvider):
            return False
        return type(provider).__name__ != "_ProxyMeterProvider"


def _may_have_set(signal: str, variable: str) -> bool:
    """Whether the application may have set a global provider of ``signal`` (``trace`` or
    ``metrics``): setting one imports ``opentelemetry.<signal>``, and the environment
    ``variable`` names one the API makes on first use. Otherwise txqueue does not import the
    API itself: that import took a process's first receive or send ~15 ms of CPU, for
    nothing to record."""
    return f"opentelemetry.{signal}" in sys.modules or variable in os.environ


def load() -> Any:
    """The imported API (`api`), imported now if not yet; False when it is not installed."""
    global api
    if api is None:
        try:
            api = _Api()
        except ImportError:
            api = False
    return api


def configure(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Use these providers instead of OpenTelemetry's global ones (None: the global ones).

    For tests, or an application that keeps several providers; most set the global
    providers with the SDK and never call this.
    """
    global _tracer, _meter, _instruments, _tracer_provider, _meter_provider, _next_check
    _tracer_provider, _meter_provider = tracer_provider, meter_provider
    _tracer = _meter = _instruments = None
    _next_check = 0.0


def tracer() -> Any:
    """The txqueue tracer when an SDK TracerProvider is configured, else None (cheaply).

    Without one, the global provider is looked at again at most every ``RECHECK`` seconds
    (reading it costs more than the rest of the check), so a provider set after txqueue's
    first message is used from then on.
    """
    if _tracer is not None:
        return _tracer
    if monotonic() < _next_check:
        return None
    return _new_tracer()


def _new_tracer() -> Any:
    global _tracer, _next_check
    if _tracer_provider is None and not _may_have_set("trace", "OTEL_PYTHON_TRACER_PROVIDER"):
        _next_check = monotonic() + RECHECK
        return None
    found = load()
    if not found:
        _next_check = float("inf")  # not installed: nothing to look at again
        return None
    provider = _tracer_provider or found.trace.get_tracer_provider()
    if isinstance(provider, found.no_tracer):
        _next_check = monotonic() + RECHECK
        return None
    _tracer = provider.get_tracer(SCOPE)
    return _tracer


def meter() -> Any:
    """The txqueue meter when an SDK MeterProvider is configured, else None."""
    global _meter
    if _meter is not None:
        return _meter
    if _meter_provider is None and not _may_have_set("metrics", "OTEL_PYTHON_METER_PROVIDER"):
        return None
    found = load()
    if not found:
        return None
    provider = _meter_provider or found.metrics.get_meter_provider()
    if not found.records_metrics(provider):
        return None
    _meter = provider.get_meter(SCOPE)
    return _meter


def instruments(make: Callable[[Any], _Made]) -> _Made | None:
    """The metric instruments ``make`` creates on the txqueue meter, made once per
    configuration (`configure` drops them); None when no meter records."""
    global _instruments
    if _instruments is None:
        found = meter()
        if found is None:
            return None
        _instruments = make(found)
    made: _Made = _instruments
    return made
