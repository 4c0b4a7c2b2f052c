#!/usr/bin/env bash
# Sets up Guidepost and runs the example agents: builds the `guidepost` command, checks
# every example definition, and draws the weather agent's journey.
#
#   scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --locked -p guidepost-cli
bin=target/debug/guidepost

echo "== guidepost check examples/agents"
"$bin" check examples/agents

echo
echo "== guidepost graph weather_lookup --agent examples/agents"
"$bin" graph weather_lookup --agent examples/agents
