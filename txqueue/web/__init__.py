"""The txqueue dashboard and its HTTP API, as an ASGI application (needs the dashboard extra).

``create_app(database, token=..., read_only=..., base_path=...)`` returns a Starlette app to
serve on its own (``txqueue dashboard``) or to mount inside a FastAPI or Starlette app.
"""

INSTALL_HINT = "pip install 'txqueue[dashboard]'"

try:
    from txqueue.web.app import create_app
except ImportError as error:  # starlette or jinja2 missing: say which, and what installs them
    raise ImportError(f"{error}; the dashboard needs its extra: {INSTALL_HINT}") from error

__all__ = ["create_app"]
