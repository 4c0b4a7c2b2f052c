#!/usr/bin/env bash
# Node client conformance: the official Parlant TypeScript client (parlant-client 3.3.1)
# and chat widget (parlant-chat-react 1.0.11) against a running server.
#
#   GUIDEPOST_URL=http://127.0.0.1:8800 ./run.sh            # install, build, both checks
#   GUIDEPOST_URL=... ./run.sh conversation | widget | setup # one part only
#
# The steps, by hand (from this folder):
#   npm ci --prefer-offline --ignore-scripts --no-audit --no-fund   # exact versions from package-lock.json
#                                                  # (add --offline to use only the npm cache)
#   npm run build                                  # esbuild: widget/index.jsx -> widget/dist/
#   GUIDEPOST_URL=http://127.0.0.1:8800 node conversation.mjs
#   GUIDEPOST_URL=http://127.0.0.1:8800 SCREENSHOT=./widget.png node widget.mjs
#
# Needs node >= 20 and Debian's chromium (apt-get install -y chromium chromium-driver);
# no browser is downloaded. --ignore-scripts is safe: the only install script is esbuild's
# check, and its binary comes from the @esbuild/linux-x64 package.
# widget.mjs env: WIDGET_MODE=float|inline, WIDGET_TIMEOUT_S (60), OBSERVE_S, WIRE_LOG, SCREENSHOT.
set -euo pipefail
cd "$(dirname "$0")"
what=${1:-all}

setup() {
  if [[ ! -x /usr/bin/chromium ]]; then
    echo "run.sh: /usr/bin/chromium missing: apt-get install -y chromium chromium-driver" >&2
    exit 1
  fi
  # reinstall only when package-lock.json changed since the last npm ci
  local want; want=$(sha256sum package-lock.json | cut -d' ' -f1)
  if [[ "$(cat node_modules/.guidepost-lock-sha 2>/dev/null)" != "$want" ]]; then
    npm ci --prefer-offline --ignore-scripts --no-audit --no-fund
    echo "$want" > node_modules/.guidepost-lock-sha
  fi
  npm run build
}

need_url() {
  if [[ -z ${GUIDEPOST_URL:-} ]]; then
    echo "run.sh: set GUIDEPOST_URL, e.g. GUIDEPOST_URL=http://127.0.0.1:8800" >&2
    exit 2
  fi
}

case $what in
  setup) setup ;;
  conversation) need_url; [[ -d node_modules ]] || setup; node conversation.mjs ;;
  widget) need_url; [[ -f widget/dist/index.js ]] || setup; node widget.mjs ;;
  all)
    need_url
    setup
    status=0
    node conversation.mjs || status=1
    node widget.mjs || status=1
    exit $status
    ;;
  *) echo "usage: $0 [all|setup|conversation|widget]" >&2; exit 2 ;;
esac
