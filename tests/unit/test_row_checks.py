"""A row's check takes a short cut for its common cells; it must agree with each cell's full
check (`check_value`): the same value back, or the same error."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from txqueue.core.schema import Column, ColumnType, Table
from txqueue.core.values import check_row, check_value
from txqueue.errors import InvalidArgument

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.datetimes(timezones=st.none() | st.just(timezone.utc) | st.timezones()),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=-3)))),
    st.dates(),
)


def _outcome(check: Any) -> tuple[str, Any]:
    try:
        return "value", check()
    except InvalidArgument as error:
        return "error", str(error)


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    if isinstance(left, datetime):  # the same instant in the same zone
        return isinstance(right, datetime) and (left, left.tzinfo) == (right, right.tzinfo)
    return bool(type(left) is type(right) and left == right)


@given(
    value=VALUES,
    kind=st.sampled_from(list(ColumnType)),
    nullable=st.booleans(),
    array=st.booleans(),
    length=st.none() | st.integers(min_value=0, max_value=4),
)
def test_a_row_check_agrees_with_each_cell_check(
    value: Any, kind: ColumnType, nullable: bool, array: bool, length: int | None
) -> None:
    column = Column("cell", kind, nullable, length, array)
    table = Table("t", (Column("k", ColumnType.INT64, False), column), ("k",))
    row = _outcome(lambda: check_row(table, ("k", "cell"), (1, value))[1])
    cell = _outcome(lambda: check_value(column, value, "values[1]"))
    assert row[0] == cell[0]
    assert _same(row[1], cell[1]) if row[0] == "value" else row[1] == cell[1]
