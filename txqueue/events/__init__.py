"""The event layer (Eventarc Advanced): buses, CEL enrollments, pipelines, HTTP delivery, retries.

Public names are re-exported from ``txqueue`` on first use (``txqueue.Events``,
``txqueue.AsyncEvents``, ``txqueue.Dispatcher``, ...); every module here needs the ``events``
extra (cloudevents, httpx, CEL, jsonschema). The modules, bottom up:

- ``cloudevent``, ``matching``, ``outcomes``, ``destinations``, ``signing``, ``delivery``,
  ``payloads``: database-independent building blocks;
- ``resources``: Bus, Pipeline, Enrollment and their stored JSON form;
- ``records``: the internal tables and the rows read back (attempts, archive, undelivered);
- ``_async``/``_sync``: AsyncEvents/Events (configuration, publish, archive, replay);
- ``recorder`` and ``dispatcher``: delivering, retrying, logging (AsyncDispatcher, Dispatcher).
"""
