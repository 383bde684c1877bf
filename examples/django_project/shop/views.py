"""``POST /orders {"email": ...}``: the order row and its confirmation email commit together."""

from __future__ import annotations

import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from shop.models import Order
from txqueue.contrib import django as txq


@csrf_exempt
@require_POST
def create_order(request: HttpRequest) -> JsonResponse:
    email = json.loads(request.body or b"{}").get("email")
    if not isinstance(email, str) or "@" not in email:
        return JsonResponse({"error": "email is required"}, status=400)
    with transaction.atomic():
        order = Order.objects.create(email=email)
        with txq.batch() as batch:  # joins the atomic block: commits with the order
            batch.send("OrderEmails", (order.pk,), json.dumps({"email": email}).encode())
    return JsonResponse({"order_id": order.pk}, status=201)
