"""A test runner that closes txqueue's connections before Django drops the test databases.

    TEST_RUNNER = "txqueue.contrib.django.testing.DiscoverRunner"

On PostgreSQL, ``DROP DATABASE`` fails while txqueue's pool still holds connections to it.
Use ``TransactionTestCase`` for tests whose sends must be seen by txqueue: ``TestCase`` never
commits, so nothing it sends becomes receivable.
"""

from __future__ import annotations

from typing import Any

from django.test.runner import DiscoverRunner as DjangoDiscoverRunner

from txqueue.contrib.django import close_databases

__all__ = ["DiscoverRunner"]


class DiscoverRunner(DjangoDiscoverRunner):  # type: ignore[misc]
    """Django's runner, closing ``txqueue.contrib.django.database()``'s before teardown."""

    def teardown_databases(self, old_config: Any, **kwargs: Any) -> None:
        close_databases()
        super().teardown_databases(old_config, **kwargs)
