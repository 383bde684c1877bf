"""Settings of the shop example. The database comes from ``$SHOP_DATABASE_URL`` (a txqueue
URL: ``sqlite:///path`` or ``postgresql://user:password@host:port/name``), default
``sqlite:///shop.db`` beside manage.py."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
USE_TZ = True
ROOT_URLCONF = "shop_site.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["txqueue.contrib.django", "shop"]
MIDDLEWARE: list[str] = []
TEST_RUNNER = "txqueue.contrib.django.testing.DiscoverRunner"


def django_database(url: str) -> dict[str, object]:
    """Django's DATABASES entry for a txqueue URL."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = parts.path[1:] if parts.path.startswith("//") else parts.path.lstrip("/")
        name = path if os.path.isabs(path) else str(BASE_DIR / path)
        # txqueue shares the file with Django, so the test database is a file too
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": name,
            "TEST": {"NAME": name + ".test"},
        }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }


DATABASES = {"default": django_database(os.environ.get("SHOP_DATABASE_URL", "sqlite:///shop.db"))}

# One schema for both engines: the queue DDL in shop/migrations is GoogleSQL.
TXQUEUE = {"DIALECT": "googlesql"}
