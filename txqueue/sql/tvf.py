"""``RECEIVE_<Queue>(...)`` and ``RENEWLEASE_<Queue>(...)`` (``spanner.receive_<queue>`` ...).

They are not SQL run by the engine: a SELECT whose only source is one of them becomes a plan
that calls ``receive`` / ``renew_lease``, projected onto the SELECT list.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from txqueue.core.durations import to_duration
from txqueue.core.schema import DELIVER_TIME, Dialect, Table
from txqueue.core.values import check_count
from txqueue.errors import InvalidArgument
from txqueue.models import LeaseRenewal, Message, ResultSet
from txqueue.sql.params import Binder
from txqueue.sql.values import interval_micros

__all__ = ["ReceivePlan", "RenewPlan", "TableFunction", "plan_table_function", "table_function"]

_NAME = re.compile(r"(receive|renewlease)_(\w+)\Z", re.IGNORECASE)
DEFAULT_MAX_DURATION = _dt.timedelta(seconds=20)
Getter = Callable[[Any], Any]


@dataclass(frozen=True)
class TableFunction:
    """A RECEIVE_/RENEWLEASE_ call found in a query (not yet checked against the catalog)."""

    kind: str  # "receive" | "renewlease"
    queue: str
    call: exp.Anonymous
    select: exp.Select


def table_function(select: exp.Select) -> TableFunction | None:
    """The RECEIVE_/RENEWLEASE_ call that is ``select``'s only source, else None."""
    from_ = select.args.get("from_")
    source = from_.this if isinstance(from_, exp.From) else None
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Anonymous):
        return None
    match = _NAME.match(str(source.this.name))
    schema = source.text("db")
    if match is None or (schema and schema.lower() != "spanner") or source.text("catalog"):
        return None
    return TableFunction(match.group(1).lower(), match.group(2), source.this, select)


@dataclass(frozen=True)
class ReceivePlan:
    """Stream ``queue`` through ``receive``; each message becomes one row."""

    queue: str
    max_duration: _dt.timedelta
    max_batch_size: int
    fields: list[str]
    getters: tuple[Getter, ...]

    def row(self, message: Message) -> tuple[Any, ...]:
        return tuple(get(message) for get in self.getters)


@dataclass(frozen=True)
class RenewPlan:
    """Renew the leases named by ``tokens``; one row per renewal."""

    queue: str
    tokens: list[str]
    fields: list[str]
    getters: tuple[Getter, ...]

    def result(self, renewals: Sequence[LeaseRenewal]) -> ResultSet:
        return ResultSet(list(self.fields), [tuple(g(r) for g in self.getters) for r in renewals])


def _receive_columns(queue: Table, dialect: Dialect) -> list[tuple[str, Getter, bool]]:
    """(name, getter, shown by ``*``) of every column RECEIVE offers."""
    pg = dialect is Dialect.POSTGRESQL
    columns: list[tuple[str, Getter, bool]] = [
        (name, _key_part(i), True) for i, name in enumerate(queue.primary_key)
    ]
    columns += [
        (queue.payload_column.name, lambda m: m.payload, True),
        (DELIVER_TIME[dialect], lambda m: m.deliver_time, True),
        (_name("SpannerLeaseExpirationTimestamp", pg), lambda m: m.lease_expiration, True),
        (_name("SpannerLeaseToken", pg), lambda m: m.lease_token, True),
        (_name("SpannerLastBatchMessage", pg), lambda m: m.last_in_batch, True),
        (_name("DeliveryCount", pg), lambda m: m.delivery_count, False),
    ]
    return columns


def _key_part(index: int) -> Getter:
    return lambda message: message.key[index]


def _renew_columns(dialect: Dialect) -> list[tuple[str, Getter, bool]]:
    pg = dialect is Dialect.POSTGRESQL
    return [
        (_name("SpannerOldLeaseToken", pg), lambda r: r.old_token, True),
        (_name("SpannerNewLeaseToken", pg), lambda r: r.new_token, True),
        (_name("SpannerLeaseExpirationTimestamp", pg), lambda r: r.lease_expiration, True),
    ]


def _name(camel: str, pg: bool) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower() if pg else camel


class _Call:
    """Checks one table-function call against its queue and builds the plan."""

    def __init__(
        self, function: TableFunction, queue: Table, dialect: Dialect, binder: Binder, where: Any
    ) -> None:
        self.function = function
        self.queue = queue
        self.dialect = dialect
        self.binder = binder
        self.where = where
        self.title = f"{function.call.name}()"

    def plan(self) -> ReceivePlan | RenewPlan:
        if not self.queue.is_queue:
            raise InvalidArgument(f"{self.queue.name} is a table, not a queue ({self.title})")
        self.check_shape()
        if self.function.kind == "receive":
            args = self.arguments(("max_batch_size", "priority", "max_duration"))
            batch = args.get("max_batch_size")
            if batch is None:
                batch = 1
            check_count(batch, f"max_batch_size of {self.title}")
            if args.get("priority") is not None:
                raise InvalidArgument("priority must be NULL: its meaning is undefined upstream")
            duration = args.get("max_duration")
            if duration is None:
                duration = DEFAULT_MAX_DURATION
            if isinstance(duration, (int, float)) and not isinstance(duration, bool):
                raise InvalidArgument(
                    f"max_duration of {self.title} must be a string such as '20m'"
                )
            fields, getters = self.project(_receive_columns(self.queue, self.dialect))
            return ReceivePlan(
                self.queue.name, to_duration(duration, "max_duration"), batch, fields, getters
            )
        args = self.arguments(("lease_tokens",))
        tokens = args.get("lease_tokens")
        if isinstance(tokens, str):
            tokens = [tokens]
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise InvalidArgument(f"lease_tokens of {self.title} must be an array of strings")
        fields, getters = self.project(_renew_columns(self.dialect))
        return RenewPlan(self.queue.name, tokens, fields, getters)

    def check_shape(self) -> None:
        select = self.function.select
        extra = [k for k, v in select.args.items() if v and k not in ("expressions", "from_")]
        if extra:
            clause = extra[0].rstrip("_").upper()
            raise InvalidArgument(
                f"{self.title} takes a plain column list: {clause} is not supported "
                f"(write SELECT <columns> FROM {self.title}){self.where(select)}"
            )

    def arguments(self, names: tuple[str, ...]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        named = False
        for position, argument in enumerate(self.function.call.expressions):
            if isinstance(argument, (exp.Kwarg, exp.PropertyEQ)):
                named = True
                name = argument.this.name.lower()
                if name not in names:
                    raise InvalidArgument(
                        f"{self.title} has no argument {name!r} (arguments: {', '.join(names)})"
                    )
                value = argument.expression
            else:
                if named:
                    raise InvalidArgument(f"positional argument after named ones in {self.title}")
                if position >= len(names):
                    raise InvalidArgument(f"{self.title} takes at most {len(names)} argument(s)")
                name, value = names[position], argument
            if name in values:
                raise InvalidArgument(f"argument {name} of {self.title} is given twice")
            values[name] = self.value(value, name)
        return values

    def value(self, node: exp.Expression, name: str) -> Any:
        """A literal, parameter or array of them, as a Python value."""
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Paren):
            return self.value(node.this, name)
        if isinstance(node, exp.Literal):
            return node.this if node.is_string else _number(node.this, name)
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            return -_number(node.this.this, name)
        if isinstance(node, exp.Array):
            return [self.value(item, name) for item in node.expressions]
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.value(node.this, name)
        if isinstance(node, exp.Parameter):
            inner = node.this
            reference = f"${inner.this}" if isinstance(inner, exp.Literal) else f"@{inner.name}"
            return self.binder.raw(reference, f" ({name} of {self.title})")
        if isinstance(node, exp.Column) and not node.table and self.binder.has(node.name):
            return self.binder.raw(node.name)  # RENEWLEASE_Q([leaseToken]) as in the docs
        if isinstance(node, exp.Interval) and isinstance(node.this, exp.Literal):
            micros = interval_micros(str(node.this.this), node.text("unit") or None)
            if micros is not None:
                return _dt.timedelta(microseconds=micros)
        raise InvalidArgument(
            f"{name} of {self.title} must be a literal or a query parameter, "
            f"got {node.sql()!r}{self.where(node)}"
        )

    def project(
        self, offered: list[tuple[str, Getter, bool]]
    ) -> tuple[list[str], tuple[Getter, ...]]:
        by_name = {name.lower(): (name, getter) for name, getter, _ in offered}
        alias = self.function.select.args["from_"].this.alias.lower()
        fields: list[str] = []
        getters: list[Getter] = []
        for item in self.function.select.expressions:
            target, label = (
                (item.this, _label(item, self.dialect))
                if isinstance(item, exp.Alias)
                else (item, None)
            )
            if isinstance(target, exp.Column) and target.table and target.table.lower() != alias:
                raise InvalidArgument(f"unknown table or alias {target.table}{self.where(target)}")
            if isinstance(target, exp.Star) or (
                isinstance(target, exp.Column) and isinstance(target.this, exp.Star)
            ):
                if label:
                    raise InvalidArgument(f"* cannot have an alias{self.where(item)}")
                fields += [name for name, _, shown in offered if shown]
                getters += [getter for _, getter, shown in offered if shown]
                continue
            if not isinstance(target, exp.Column) or target.name.lower() not in by_name:
                known = ", ".join(name for name, _, _ in offered)
                raise InvalidArgument(
                    f"{self.title} offers the columns {known}; got {item.sql()!r}{self.where(item)}"
                )
            name, getter = by_name[target.name.lower()]
            fields.append(label or name)
            getters.append(getter)
        return fields, tuple(getters)


def plan_table_function(
    function: TableFunction, queue: Table, dialect: Dialect, binder: Binder, where: Any
) -> ReceivePlan | RenewPlan:
    """The plan of a RECEIVE_/RENEWLEASE_ query, checked against ``queue``."""
    return _Call(function, queue, dialect, binder, where).plan()


def _label(item: exp.Alias, dialect: Dialect) -> str:
    identifier = item.args["alias"]
    text = str(identifier.this)
    return text.lower() if dialect is Dialect.POSTGRESQL and not identifier.quoted else text


def _number(text: str, name: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be a number, got {text!r}") from None
