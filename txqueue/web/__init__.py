"""The txqueue dashboard and its HTTP API, as an ASGI application (needs the dashboard extra).

``create_app(database, token=..., read_only=..., base_path=...)`` returns a Starlette app to
serve on its own (``txqueue dashboard``) or to mount inside a FastAPI or Starlette app.
"""

from txqueue.web.app import create_app

__all__ = ["create_app"]
