"""The event layer (Eventarc Advanced): buses, CEL enrollments, pipelines, HTTP delivery, retries.

Public names are re-exported from ``txqueue`` on first use (``txqueue.Events``,
``txqueue.AsyncEvents``, ``txqueue.Dispatcher``, ...); every module here needs the ``events``
extra (cloudevents, httpx, CEL, jsonschema). The modules, bottom up:

- ``cloudevent``, ``matching``, ``outcomes``, ``destinations``, ``signing``, ``delivery``,
  ``payloads``: database-independent building blocks;
- ``resources``: Bus, Pipeline, Enrollment and their stored JSON form;
- ``records``: the internal tables and the rows read back (attempts, archive, undelivered);
- ``_async``/``_sync``: AsyncEvents/Events (configuration, publish, archive, replay);
- ``recorder``, ``dispatcher`` and ``dispatcher_thread``: delivering, retrying, logging
  (AsyncDispatcher; Dispatcher, one on its own thread).
"""

from __future__ import annotations

import importlib

#: The top-level packages the ``events`` extra installs, imported here so that a missing one
#: is reported once, with the command that installs them, instead of as a bare import error.
EXTRA_PACKAGES = ("cloudevents", "httpx", "cel", "jsonschema", "referencing")
INSTALL_HINT = "pip install 'txqueue[events]'"


def _require_extra() -> None:
    for package in EXTRA_PACKAGES:
        try:
            importlib.import_module(package)
        except ImportError as error:
            raise ModuleNotFoundError(
                f"txqueue's event layer needs the events extra, and {package!r} cannot be "
                f"imported ({error}): {INSTALL_HINT}",
                name=package,
            ) from error


_require_extra()
