from django.db.models import Q
from netbox.filtersets import NetBoxModelFilterSet

from .models import Widget


class WidgetFilterSet(NetBoxModelFilterSet):
    class Meta:
        model = Widget
        fields = ("id", "name", "colour", "size")

    def search(self, queryset, name, value):
        if not value.strip():
            return queryset
        return queryset.filter(Q(name__icontains=value) | Q(colour__icontains=value))
