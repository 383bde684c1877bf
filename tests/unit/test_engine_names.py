"""Engine knowledge stays under txqueue/drivers: everything else asks the engine's traits.

A comparison with an engine's name elsewhere (``engine == "sqlite"``, a ``"postgres"``
literal) is a decision a third engine would have to find and change by hand; the traits
(`txqueue.drivers.traits.EngineTraits`, chosen by `txqueue.drivers.engines`) hold it once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from txqueue.drivers import engines

PACKAGE = Path(__file__).resolve().parents[2] / "txqueue"
ENGINE_NAME = re.compile(r"""engine\s*[!=]=|["'](sqlite|postgres|spanner(_postgresql)?)["']""")
#: Lines that name an engine's word for something else: Spanner's PostgreSQL-dialect queue
#: functions live in the SQL schema ``spanner`` (``spanner.receive_<queue>``).
NOT_ENGINE_NAMES = (("txqueue/sql/tvf.py", 'schema.lower() != "spanner"'),)
#: The faces' escape hatch into an engine's own SQL: for tests and the application, never for
#: txqueue's own code above the drivers (which runs GoogleSQL through execute_internal_sql).
ENGINE_SQL = re.compile(r"\.execute_engine_sql\(")


def _lines_above_the_drivers(pattern: re.Pattern[str]) -> list[str]:
    """``path:line: text`` of each line outside txqueue/drivers that ``pattern`` finds, but
    for the ``NOT_ENGINE_NAMES``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE.parent))
        if "drivers" in path.relative_to(PACKAGE).parts[:1]:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            allowed = any(where == place and text in line for place, text in NOT_ENGINE_NAMES)
            if pattern.search(line) and not allowed:
                found.append(f"{where}:{number}: {line.strip()}")
    return found


def test_no_engine_name_is_compared_outside_the_drivers() -> None:
    found = _lines_above_the_drivers(ENGINE_NAME)
    assert found == [], "engine names outside txqueue/drivers:\n" + "\n".join(found)


def test_no_engine_sql_is_written_above_the_drivers() -> None:
    found = _lines_above_the_drivers(ENGINE_SQL)
    assert found == [], "engine SQL above txqueue/drivers:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("sqlite:///app.db", "sqlite"),
        ("SQLITE:///app.db", "sqlite"),
        ("postgresql://localhost/app", "postgres"),
        ("postgres://localhost/app", "postgres"),
        ("postgresql+psycopg://localhost/app", "postgres"),
    ],
)
def test_each_url_scheme_chooses_its_engine_once(url: str, name: str) -> None:
    traits = engines.traits_for(url)
    assert traits.name == name
    assert engines.traits_named(name) is traits
    assert engines.parse_url(url).engine == name


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///app.db", "sqlite:///app.db"),  # no pool to size
        ("postgresql://h/db", "postgresql://h/db?pool_size=6"),
        ("postgresql://h/db?sslmode=require", "postgresql://h/db?sslmode=require&pool_size=6"),
        ("postgresql://h/db?pool_size=2", "postgresql://h/db?pool_size=2"),  # the URL's own
        ("mysql://h/db", "mysql://h/db"),  # left for connecting to report
    ],
)
def test_the_pool_size_is_added_where_the_engine_pools_connections(url: str, expected: str) -> None:
    assert engines.with_pool_size(url, 6) == expected
