from django.db import models


class Order(models.Model):
    email = models.EmailField()
    emailed_at = models.DateTimeField(null=True)
