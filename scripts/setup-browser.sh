#!/usr/bin/env bash
# Install what the real-browser tests (tests/browser/) need: Debian's `chromium` package (with
# apt-get, only when /usr/bin/chromium is missing) and Playwright in .venv (the `browser`
# extra). Never `playwright install`: the tests drive /usr/bin/chromium through Playwright's
# executable_path. Run by scripts/test; does nothing when all is there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chromium="${LITE_AGENT_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ]; then
  if ! command -v apt-get >/dev/null; then
    echo "setup-browser: $chromium is missing and there is no apt-get to install it" >&2
    exit 1
  fi
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # Another apt run may hold the lock for a while: wait for it instead of failing.
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium \
    >/dev/null
fi
"$chromium" --headless --no-sandbox --version >/dev/null 2>&1 \
  || { echo "setup-browser: $chromium does not start" >&2; exit 1; }
if ! "$root/.venv/bin/python" -c "import playwright.sync_api" 2>/dev/null; then
  bash "$root/scripts/setup.sh" "test,lab,browser"
fi
