#!/usr/bin/env bash
# The OpenAI-compatible tests in a second venv with the newest openai, httpx2
# (and its httpcore2) and langchain-openai, whatever pyproject.toml pins:
# what `pip install -U openai` or a shared venv gives a user. A release
# published since the pins moved that breaks a turn fails here, naming the
# releases installed beside the pinned ones. .ci/run starts it in the
# background; by hand: bash scripts/newest_releases.sh
set -uo pipefail
cd "$(dirname "$0")/.."
venv=${NEWEST_VENV:-.venv-newest}
newest=(openai httpx2 httpcore2 langchain-openai)

rm -rf "$venv"
log=$(mktemp)
# pip's output is shown only when it fails; it warns that the upgrade breaks the pins: that is the point.
{ python3 -m venv "$venv" && "$venv/bin/pip" install -q -e '.[test]' && "$venv/bin/pip" install -q -U "${newest[@]}"; } \
  >"$log" 2>&1 || { tail -20 "$log"; echo "installing netbox-chat or the newest ${newest[*]} failed"; exit 1; }
rm -f "$log"
"$venv/bin/python" -m compileall -q netbox_chat >/dev/null || true

versions() { "$venv/bin/python" - "$@" <<'PY'
import sys
from importlib.metadata import version
print(", ".join(f"{name} {version(name)}" for name in sys.argv[1:]))
PY
}
installed=$(versions "${newest[@]}")
pinned=$(grep -oE '"(openai|httpx2|httpcore2|langchain-openai)==[^"]+"' pyproject.toml | tr -d '"' | paste -sd' ')
echo "newest: $installed (pinned: $pinned)"

timeout -k 60 25m "$venv/bin/pytest" -q tests/test_openai.py tests/test_coalesce.py
rc=$?
if [ $rc -ne 0 ]; then
  echo "!!! THE NEWEST RELEASES BREAK netbox-chat: with $installed, the OpenAI-compatible tests above fail (pytest exit $rc); pinned and passing: $pinned !!!"
fi
exit $rc
