from django.db import models
from netbox.models import NetBoxModel


class Widget(NetBoxModel):
    name = models.CharField(max_length=100, unique=True)
    colour = models.CharField(max_length=30, blank=True)
    size = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name
