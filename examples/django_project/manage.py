#!/usr/bin/env python
"""The shop example's manage.py: a Django project whose orders and their emails commit together.

    cd examples/django_project
    python manage.py migrate                            # the Order table, then the queue
    python manage.py runserver                          # POST /orders {"email": "..."}
    python manage.py txqueue worker shop.tasks:app      # sends the emails
    python manage.py test shop                          # its tests (SQLite)

``SHOP_DATABASE_URL=postgresql://user@host/shop`` runs it on PostgreSQL instead of
``sqlite:///shop.db``.
"""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
