"""txqueue.contrib.fastapi: examples/fastapi_app driven over HTTP with httpx (its ASGI
transport, inside the app's lifespan as a server runs it) on both engines, and the edges of
the lifespan and the mounted dashboard."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("fastapi")

import httpx
from fastapi import FastAPI

import txqueue
from txqueue.contrib.fastapi import Queues
from txqueue.errors import FailedPrecondition

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOKEN = "a-long-random-token-for-the-fastapi-tests"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@asynccontextmanager
async def serving(app: FastAPI, *, lifespan: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of ``app``, inside its lifespan (start-up before, shutdown after)."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    client = httpx.AsyncClient(transport=transport, base_url="http://shop.test")
    if not lifespan:
        async with client:
            yield client
        return
    async with app.router.lifespan_context(app), client:
        yield client


@pytest.fixture
def shop(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """examples/fastapi_app/app.py imported afresh on this test's database."""
    monkeypatch.setenv("SHOP_DATABASE_URL", database_url)
    monkeypatch.setenv("SHOP_DASHBOARD_TOKEN", TOKEN)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("fastapi_app.app", None)
    yield importlib.import_module("fastapi_app.app")
    sys.modules.pop("fastapi_app.app", None)


async def test_order_and_its_email_commit_before_the_response(shop: ModuleType) -> None:
    async with serving(shop.app) as client:
        created = await client.post("/orders", json={"order_id": "o-1", "email": "ada@x.org"})
        assert created.status_code == 201, created.text
        # committed before the response went out: another connection sees both at once
        with txqueue.connect(shop.DATABASE_URL) as other:
            assert [m.key for m in other.list_messages("OrderEmails")] == [("o-1",)]
        found = await client.get("/orders/o-1")
        assert found.json() == {"order_id": "o-1", "email": "ada@x.org"}


async def test_an_endpoint_that_raises_writes_nothing(shop: ModuleType) -> None:
    async with serving(shop.app) as client:
        refused = await client.post("/orders", json={"order_id": "o-2", "email": "no-at-sign"})
        assert refused.status_code == 400
        assert (await client.get("/orders/o-2")).status_code == 404
    with txqueue.connect(shop.DATABASE_URL) as other:
        assert other.list_messages("OrderEmails") == []


async def test_a_failed_commit_is_an_error_response_not_a_2xx(shop: ModuleType) -> None:
    async with serving(shop.app) as client:
        first = await client.post("/orders", json={"order_id": "o-3", "email": "a@x.org"})
        assert first.status_code == 201
        again = await client.post("/orders", json={"order_id": "o-3", "email": "b@x.org"})
        assert again.status_code == 500  # AlreadyExists at commit, before any response
        assert (await client.get("/orders/o-3")).json()["email"] == "a@x.org"


async def test_dashboard_is_mounted_under_its_path(shop: ModuleType) -> None:
    async with serving(shop.app) as client:
        page = await client.get("/txq/")
        assert page.status_code == 303 and page.headers["location"] == "/txq/login"
        queues = await client.get("/txq/api/v1/queues", headers=BEARER)
        assert queues.status_code == 200
        assert "OrderEmails" in queues.text
        assert (await client.get("/txq/api/v1/queues")).status_code == 401


async def test_lifespan_closes_what_it_opened(sqlite_url: str) -> None:
    queues = Queues(sqlite_url)
    app = FastAPI(lifespan=queues.lifespan)
    app.mount("/txq", queues.dashboard(token=TOKEN))
    async with serving(app) as client:
        database = queues.database
        assert (await client.get("/txq/api/v1/queues", headers=BEARER)).status_code == 200
    with pytest.raises(FailedPrecondition, match=r"lifespan=queues\.lifespan"):
        queues.database  # noqa: B018
    async with serving(app, lifespan=False) as client:
        assert (await client.get("/txq/api/v1/queues", headers=BEARER)).status_code == 503
    async with serving(app):  # a second start opens afresh
        assert queues.database is not database


async def test_dashboard_outside_the_lifespan_says_so(sqlite_url: str) -> None:
    queues = Queues(sqlite_url)
    app = FastAPI()  # lifespan forgotten
    app.mount("/txq", queues.dashboard(token=TOKEN))
    async with serving(app, lifespan=False) as client:
        answer = await client.get("/txq/")
    assert answer.status_code == 503
    assert "lifespan=queues.lifespan" in answer.text


async def test_dashboard_without_a_token_does_not_start(sqlite_url: str) -> None:
    queues = Queues(sqlite_url)
    app = FastAPI(lifespan=queues.lifespan)
    app.mount("/txq", queues.dashboard())
    with pytest.raises(txqueue.errors.InvalidArgument, match="token"):
        async with serving(app):
            pass
    with pytest.raises(FailedPrecondition):
        queues.database  # noqa: B018  (closed again after the failed start)


def test_without_the_extra_the_error_names_it() -> None:
    code = "import sys; sys.modules['starlette'] = None\nimport txqueue.contrib.fastapi\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "pip install 'txqueue[fastapi]'" in done.stderr, done.stderr
