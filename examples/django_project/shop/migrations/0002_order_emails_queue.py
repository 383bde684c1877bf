"""The queue of order emails, in a migration of its own (txqueue's DDL commits at once)."""

from django.db import migrations

from txqueue.contrib.django.operations import UpdateDdl


class Migration(migrations.Migration):
    dependencies = [("shop", "0001_initial")]
    operations = [
        UpdateDdl(
            forward=[
                "CREATE QUEUE OrderEmails (OrderId INT64 NOT NULL, Payload BYTES(MAX) NOT NULL)"
                " PRIMARY KEY (OrderId)"
            ],
            backward=["DROP QUEUE OrderEmails"],
        ),
    ]
