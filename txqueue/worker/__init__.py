"""The worker runtime: handlers registered on an ``App``, run by ``txqueue worker module:app``.

Handler outcomes: return → ack; ``Retry`` → release after a delay; ``GiveUp`` → dead letter
now; any other exception → the handler's ``RetryPolicy``. See ``docs/worker.md``.
"""

from txqueue.worker.app import App, HandlerSpec, Schedule
from txqueue.worker.context import Delivery, current_delivery, lease_lost
from txqueue.worker.observe import Metrics, Stats, configure_logging
from txqueue.worker.outcomes import GiveUp, Outcome, OutcomeKind, Retry
from txqueue.worker.runtime import Worker
from txqueue.worker.scenarios import checkpoint, checkpoint_async
from txqueue.worker.tasks import Task

__all__ = [
    "App",
    "Delivery",
    "GiveUp",
    "HandlerSpec",
    "Metrics",
    "Outcome",
    "OutcomeKind",
    "Retry",
    "Schedule",
    "Stats",
    "Task",
    "Worker",
    "checkpoint",
    "checkpoint_async",
    "configure_logging",
    "current_delivery",
    "lease_lost",
]
