"""Integrations with web frameworks and migration tools, each behind its own extra.

- ``txqueue.contrib.django`` (``txqueue[django]``): sends that join ``transaction.atomic()``,
  queue DDL in Django migrations, ``manage.py txqueue worker|dispatcher|dashboard``.
- ``txqueue.contrib.fastapi`` (``txqueue[fastapi]``): a lifespan that opens the asyncio
  database, a dependency that yields a batch, the dashboard mounted under a path.
- ``txqueue.contrib.alembic`` (``txqueue[alembic]``): ``op.update_ddl([...])`` in Alembic
  migrations.

They use txqueue's public API only.
"""
