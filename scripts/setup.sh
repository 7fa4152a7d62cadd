#!/usr/bin/env bash
# Create .venv (if missing) and install the project with the given extras, e.g. "test,lab".
# Sourced by scripts/test and scripts/demo; needs nothing but python3 (>= 3.11) on PATH.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-lab}"
py="${PYTHON:-python3}"
if [ ! -x "$root/.venv/bin/python" ]; then
  "$py" -m venv "$root/.venv"
fi
stamp="$root/.venv/.installed-$extras"
# An install made for more extras counts too (./scripts/lab after ./scripts/test installs nothing).
covered() {
  local have wanted
  for have in "$root"/.venv/.installed-*; do
    [ -f "$have" ] && [ ! "$root/pyproject.toml" -nt "$have" ] || continue
    # pip install -e copies the front-end part into .venv/share (docs/widgets.md, Notebook 7)
    [ ! "$root/lite_agent_jupyter/labextension/static/remoteEntry.js" -nt "$have" ] || continue
    wanted=1
    for extra in ${extras//,/ }; do
      case ",${have##*/.installed-}," in *",$extra,"*) ;; *) wanted=0 ;; esac
    done
    [ "$wanted" = 1 ] && return 0
  done
  return 1
}
if ! covered; then
  "$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  "$root/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root[$extras]"
  touch "$stamp"
fi
