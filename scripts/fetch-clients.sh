#!/usr/bin/env bash
# Installs the official Parlant clients the server's conformance tests drive, and Debian's
# Chromium for the chat widget test:
#   - parlant-client 3.3.1 (Python, PyPI) into $GUIDEPOST_CLIENTS_DIR/python
#     (default ~/.cache/guidepost/clients/python); prints `export GUIDEPOST_PYTHON_CLIENT=...`
#   - parlant-client (TypeScript) and parlant-chat-react from npm, with the exact versions
#     of crates/guidepost-server/tests/clients/node/package-lock.json, into that folder's
#     node_modules, and the widget page built with esbuild
#   - chromium and chromium-driver from Debian when /usr/bin/chromium is missing, and jq (as root)
#
#   eval "$(scripts/fetch-clients.sh)"
#
# Everything else goes to stderr. Each part is skipped when already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

clients="${GUIDEPOST_CLIENTS_DIR:-$HOME/.cache/guidepost/clients}"
python_dir="$clients/python-parlant-client-3.3.1"
node_dir=crates/guidepost-server/tests/clients/node

if [ ! -f "$python_dir/.installed" ]; then
    echo "fetch-clients: installing parlant-client 3.3.1 (Python) into $python_dir" >&2
    rm -rf "$python_dir"
    mkdir -p "$python_dir"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-warn-conflicts \
        --target "$python_dir" "parlant-client==3.3.1" >&2
    touch "$python_dir/.installed"
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "fetch-clients: node and npm are needed for the TypeScript client and widget tests" >&2
    exit 1
fi
want=$(sha256sum "$node_dir/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$node_dir/node_modules/.guidepost-lock-sha" 2>/dev/null)" != "$want" ]; then
    echo "fetch-clients: npm ci in $node_dir" >&2
    (cd "$node_dir" && npm ci --prefer-offline --ignore-scripts --no-audit --no-fund >&2)
    echo "$want" > "$node_dir/node_modules/.guidepost-lock-sha"
fi
(cd "$node_dir" && npm run --silent build >&2)

# Debian's chromium (the widget and web page tests) and jq (the README's curl examples).
missing=""
[ -x /usr/bin/chromium ] || missing="chromium chromium-driver"
command -v jq >/dev/null 2>&1 || missing="$missing jq"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "fetch-clients: installing from Debian:$missing" >&2
        apt-get update -qq >&2
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >&2
    else
        echo "fetch-clients: missing:$missing (apt-get install$missing)" >&2
        exit 1
    fi
fi

echo "export GUIDEPOST_PYTHON_CLIENT='$python_dir'"
