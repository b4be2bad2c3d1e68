from netbox.api.routers import NetBoxRouter

from .views import WidgetViewSet

router = NetBoxRouter()
router.register("widgets", WidgetViewSet)
urlpatterns = router.urls
