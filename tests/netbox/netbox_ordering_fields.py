"""Print, as JSON, the fields NetBox's API honours in ?ordering= for every list endpoint.

DRF's OrderingFilter silently ignores unknown ordering terms, and which serializer
fields are orderable (not computed, not model properties) is not in the OpenAPI
schema. Run inside NetBox (tests/netbox/make_filter_table.sh does this):

    netbox shell < tests/netbox/netbox_ordering_fields.py > ordering.json
"""

import json
import sys

from django.urls import get_resolver
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

out = {}
factory = APIRequestFactory()


def walk(patterns, prefix=""):
    for p in patterns:
        if hasattr(p, "url_patterns"):
            yield from walk(p.url_patterns, prefix + str(p.pattern))
        else:
            yield prefix + str(p.pattern), p


for route, p in walk(get_resolver().url_patterns):
    cls = getattr(p.callback, "cls", None)
    actions = getattr(p.callback, "actions", None) or {}
    if cls is None or actions.get("get") != "list" or not route.startswith("api/"):
        continue
    qs = getattr(cls, "queryset", None)
    if qs is None:
        continue
    view = cls()
    view.action = "list"
    view.format_kwarg = None
    view.kwargs = {}
    view.request = Request(factory.get("/"))
    view.brief = False
    try:
        valid = OrderingFilter().get_valid_fields(qs, view, {"request": view.request})
    except Exception as e:
        print(f"skip {route}: {e}", file=sys.stderr)
        continue
    name = f"{qs.model._meta.app_label}.{qs.model._meta.model_name}"
    path = route[len("api/") :].split("^")[0].rstrip("/$").replace("^", "")
    out[name] = {"route": route, "ordering": sorted({f for f, _ in valid})}
json.dump(out, sys.stdout, indent=None, sort_keys=True)
