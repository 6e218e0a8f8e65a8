#!/usr/bin/env bash
# The planner's work per 16-tenant plan of the benchmark's fleet, which the machine's speed does not
# move: valgrind's instruction count (callgrind, PYTHONHASHSEED=0) of one process planning the
# fleet's first N mixes (benchmarks/plan_fleet.py --quiet) less one planning the first mix, divided
# by N - 1; then the plans' digest (the same digest from two trees: the same plans).
# usage: benchmarks/bench_instructions.sh [N]     (default 100; needs valgrind)
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
count="${1:-100}"
((count > 1)) || { echo "bench_instructions: N must be 2 or more" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench_instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
python="${GPUVIRT_VENV:-$REPO_ROOT/.venv}/bin/python3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
instructions() {
  # the process's own collections: this checkout's, not one PYTHONPATH names
  env -u PYTHONPATH PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file="$work/out.$1" \
    "$python" benchmarks/plan_fleet.py "$1" --quiet 2>"$work/err.$1" >/dev/null
  grep -ao 'Collected : [0-9]*' "$work/err.$1" | awk '{print $3}'
}
one="$(instructions 1)"
many="$(instructions "$count")"
"$python" - "$one" "$many" "$count" <<'PY'
import sys
one, many, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
print("instructions per 16-tenant plan: %.2f M (first %d mixes)" % ((many - one) / (count - 1) / 1e6, count))
PY
env -u PYTHONPATH PYTHONHASHSEED=0 "$python" benchmarks/plan_fleet.py "$count"
