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
python3 -m venv "$venv" && "$venv/bin/pip" install -q -e '.[test]' || { echo "installing netbox-chat failed"; exit 1; }
# pip warns that these break the pins: that is the point.
"$venv/bin/pip" install -q -U "${newest[@]}" 2>&1 | grep -v "requires .*, but you have\|dependency resolver" \
  || true
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
