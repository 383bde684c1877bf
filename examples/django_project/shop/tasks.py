"""The worker's handlers: ``python manage.py txqueue worker shop.tasks:app``.

The App names no database: ``manage.py txqueue worker`` passes the one in the settings.
"""

from __future__ import annotations

import json

from django.utils import timezone

import txqueue
from shop.models import Order

app = txqueue.App()


@app.handler("OrderEmails")
def send_order_email(message: txqueue.Message) -> None:
    email = json.loads(message.payload)["email"]
    # your mailer here
    Order.objects.filter(pk=message.key[0]).update(emailed_at=timezone.now())
    print(f"order email sent to {email}", flush=True)
