from netbox.api.serializers import NetBoxModelSerializer

from ..models import Widget


class WidgetSerializer(NetBoxModelSerializer):
    class Meta:
        model = Widget
        # no display_url: the plugin has no UI views to link to
        fields = ("id", "url", "display", "name", "colour", "size", "created", "last_updated")
        brief_fields = ("id", "url", "display", "name")
