from netbox.api.viewsets import NetBoxModelViewSet

from ..filtersets import WidgetFilterSet
from ..models import Widget
from .serializers import WidgetSerializer


class WidgetViewSet(NetBoxModelViewSet):
    queryset = Widget.objects.all()
    serializer_class = WidgetSerializer
    filterset_class = WidgetFilterSet
