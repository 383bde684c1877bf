"""Cron schedules for ``@app.periodic(cron=..., timezone=...)``, evaluated by cronsim.

cronsim reads the five-field syntax of Debian's cron (with ``L``, ``W``, ``#`` and the
``@daily``-style nicknames) and follows its daylight-saving rules, which this module keeps:

- a run whose local time falls in the hour skipped in spring runs at the end of the gap
  (``30 2 * * *`` in Europe/Berlin runs at 03:00 on that day);
- a run whose local time occurs twice in autumn runs once, at the first occurrence;
- expressions with a step in the hour or minute field (``*/30 * * * *``) keep running every
  real 30 minutes through both changes.

Slots are instants in UTC: the periodic chain's keys and deliver times do not depend on the
zone once computed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from txqueue.errors import InvalidArgument

__all__ = ["check_cron", "next_cron_slot", "zone"]


def zone(name: object) -> ZoneInfo:
    """The IANA time zone ``name``; InvalidArgument for anything else."""
    if not isinstance(name, str) or not name or len(name) > 64:
        raise InvalidArgument(
            f"timezone must be an IANA zone name like 'Europe/Berlin', got {name!r}"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"timezone {name!r} is not a known IANA zone (like 'Europe/Berlin' or 'UTC')"
        ) from None


def check_cron(expression: object, where: ZoneInfo) -> str:
    """``expression`` when cronsim can evaluate it (it finds one next run); else InvalidArgument
    naming the field and cronsim's reason."""
    if not isinstance(expression, str) or not expression.strip() or len(expression) > 256:
        raise InvalidArgument(
            f"cron must be a cron expression like '*/5 * * * *', got {expression!r}"
        )
    try:
        next_cron_slot(expression, where, datetime.now(timezone.utc))
    except (CronSimError, StopIteration) as error:
        raise InvalidArgument(
            f"cron {expression!r} is not a valid cron expression: {error}"
        ) from None
    return expression


def next_cron_slot(expression: str, where: ZoneInfo, after: datetime) -> datetime:
    """The first run of ``expression`` in zone ``where`` strictly after ``after``, in UTC."""
    local = after.astimezone(where)
    return next(CronSim(expression, local)).astimezone(timezone.utc)
