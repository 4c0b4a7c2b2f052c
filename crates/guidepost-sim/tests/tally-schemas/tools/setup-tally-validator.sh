#!/usr/bin/env bash
# Prepares a directory in which Tally's own loaders read Guidepost's run folders headlessly with
# bun, for the artifact test of guidepost-sim (tests/integration/tally_artifacts.rs):
#
#   bash setup-tally-validator.sh DIR TALLY_SRC
#   GUIDEPOST_TALLY_VALIDATOR=DIR cargo test -p guidepost-sim tally
#
# DIR        where to set up (created if missing).
# TALLY_SRC  Tally's sources: a checkout of https://github.com/tally-evals/tally (the schemas
#            beside this script were written from commit 6aa50a4), or a bare git directory of it.
#            Tally's packages are not on the npm registry, so its core sources are copied from there.
#
# Needs node and npm: bun comes from the npm package `bun` (its binary ships in the optional
# dependency @oven/bun-linux-x64 or the one for your platform), zod from npm at the version
# Tally's core resolves (3.25.76, zod v3 API). Nothing is installed outside DIR.
set -euo pipefail
if [ $# -ne 2 ]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
DIR="$1"
TALLY_SRC="$2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

mkdir -p "$DIR"
rm -rf "$DIR/packages/core"
if [ -d "$TALLY_SRC/packages/core/src" ]; then
  mkdir -p "$DIR/packages/core"
  cp -r "$TALLY_SRC/packages/core/src" "$DIR/packages/core/src"
else
  git --git-dir="$TALLY_SRC" archive HEAD packages/core/src | tar -x -C "$DIR"
fi

cd "$DIR"
if [ ! -f package.json ]; then
  printf '{ "name": "tally-validator", "private": true, "type": "module" }\n' > package.json
fi
npm install --no-audit --no-fund --silent bun@1 zod@3.25.76 >/dev/null
cp "$HERE/validate-tally-folder.ts" "$DIR/validate-tally-folder.ts"
"$DIR/node_modules/.bin/bun" --version >/dev/null
echo "ready: GUIDEPOST_TALLY_VALIDATOR=$DIR"
