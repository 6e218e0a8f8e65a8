#!/usr/bin/env bash
# The lab host (a QEMU VM standing in for a GPU server): see docs/lab.md.
# usage: scripts/lab.sh build|start|wait|up|stop|status|ssh [CMD...]|console
# State: ${GPUVIRT_LAB_DIR:-<repo>/.lab}.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec python3 "$REPO_ROOT/lab/lab.py" "$@"
