#!/usr/bin/env bash
# Regenerate netbox_chat/netbox/filters.json from the live tier's NetBox (scripts/netbox_up.sh):
# filter names, lookups and value kinds from its OpenAPI schema, orderable fields from
# NetBox itself (not in the schema), less the terms it answers 500 for. Needs NETBOX_URL and NETBOX_TOKEN.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
NB_PORT=${NB_PORT:-8001}
NB_BASE=${NB_BASE:-$REPO/.netbox-dev/p$NB_PORT}
NB_VENV=${NB_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/netbox-chat/netbox-4.7.3-py3.12}
: "${NETBOX_URL:?set NETBOX_URL (scripts/netbox_up.sh prints it)}" "${NETBOX_TOKEN:?set NETBOX_TOKEN}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && NETBOX_ROOT=$NB_BASE/nbroot "$NB_VENV/bin/netbox" shell -v 0 \
   < "$REPO/tests/netbox/netbox_ordering_fields.py" > "$tmp/ordering.json")
cd "$REPO"
"$REPO/.venv/bin/python" -m netbox_chat.netbox.schema --url "$NETBOX_URL" --ordering "$tmp/ordering.json" --no-plugins \
  > "$tmp/filters.json"
"$REPO/.venv/bin/python" "$REPO/tests/netbox/probe_ordering.py" "$tmp/filters.json"   # drops 500s
mv "$tmp/filters.json" netbox_chat/netbox/filters.json
ls -la netbox_chat/netbox/filters.json
