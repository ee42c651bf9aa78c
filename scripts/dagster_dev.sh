#!/usr/bin/env bash
# Run `dagster dev` so that SIGTERM or SIGINT stops it, and every process it started,
# also when it was started in the background (`scripts/dagster_dev.sh -p 3001 &`, nohup, CI).
#
#   scripts/dagster_dev.sh [dagster dev options]      # default: -w workspace.yaml
#   (DAGSTER_HOME defaults to ./.dagster_home; a new one gets RAGSpine's dagster.yaml)
#   kill <pid of this script>                          # stops within a few seconds
#
# Why plain `dagster dev &` ignores SIGTERM: a background job of a non-interactive shell
# starts with SIGINT ignored, and dagster dev maps SIGTERM to its SIGINT handler, so it
# ignores SIGTERM as well (and its webserver and daemon do the same). This script puts
# SIGINT and SIGTERM back to their defaults before starting it, in a process group of its
# own; on SIGTERM/SIGINT it asks dagster dev to shut down, and after
# DAGSTER_DEV_STOP_GRACE_S seconds (default 20) kills whatever is left of that group.
set -euo pipefail
cd "$(dirname "$0")/.."
grace="${DAGSTER_DEV_STOP_GRACE_S:-20}"
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && python=.venv/bin/python
args=("$@")
[ "${#args[@]}" -eq 0 ] && args=(-w workspace.yaml)
# the instance `ragspine ingest` records into, with RAGSpine's dagster.yaml when it is new:
# one run per library at a time, run monitoring (ragspine_assets/instance_config.py)
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"
"$python" -c 'import sys; from pathlib import Path; from ragspine_assets.instance_config import write_default_instance_config as w; w(Path(sys.argv[1]))' "$DAGSTER_HOME"

"$python" -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)   # inherited SIG_IGN would survive exec
signal.signal(signal.SIGTERM, signal.SIG_DFL)
os.setpgid(0, 0)                               # its own process group: stopped as a whole
os.execvp(sys.executable, [sys.executable, "-m", "dagster", "dev", *sys.argv[1:]])
' "${args[@]}" &
child=$!

group_alive() { kill -0 -- "-$child" 2>/dev/null || kill -0 "$child" 2>/dev/null; }

stop() {
  trap - TERM INT
  kill -TERM "$child" 2>/dev/null || true          # dagster dev's own graceful shutdown
  for _ in $(seq $((grace * 10))); do
    group_alive || exit 0
    sleep 0.1
  done
  echo "dagster_dev.sh: still running after ${grace}s; killing process group $child" >&2
  kill -KILL -- "-$child" 2>/dev/null || true
  exit 1
}
trap stop TERM INT

status=0
wait "$child" || status=$?
# dagster dev ended by itself: leave nothing of its group behind
if group_alive; then kill -TERM -- "-$child" 2>/dev/null || true; sleep 2; kill -KILL -- "-$child" 2>/dev/null || true; fi
exit "$status"
