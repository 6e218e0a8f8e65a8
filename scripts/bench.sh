#!/usr/bin/env bash
# The benchmarks, through the repository's virtualenv and collection path (scripts/env.sh).
#
# usage: scripts/bench.sh BENCHMARK [ARGS...]     (scripts/bench.sh BENCHMARK --help for its flags)
#   bringup     benchmarks/bench_bringup.py: the lab host from bare with the main command's playbook
#               (molecule/default/converge.yml: boot.yml, the lab's soft-RoCE stand-ins, site.yml,
#               the guest stages on the stand-in guests),
#               then idempotent re-runs under a settings matrix (pipelining, ControlPersist, facts),
#               each against the median of `ansible -m ping`; it stops and restarts the lab.
#               Results: $GPUVIRT_LAB_DIR/run/bench/ (JSON + Markdown), table on stdout.
#   planner     benchmarks/bench_planner.py: the placement planner (no lab, one core); --write
#               docs/benchmarks.md regenerates its section. `placement` is the same.
#   imports     benchmarks/bench_imports.py: what each module call pays to import its code on the
#               running lab host (python3, + ansible's basic as a ping, + each module); --write.
#   preview     benchmarks/bench_preview.py: the preview of the example inventory against the DGX
#               A100-class capture (no lab): host-side module calls, CPU against a local ping, for
#               1 host and --hosts N; --hgx: the HGX H100 capture too, side by side in the same runs;
#               --write docs/benchmarks.md.
#   payload     benchmarks/bench_payload.py: each module's AnsiballZ payload as ansible-core builds it
#               (no lab); --against REV side by side with a git revision; --write docs/benchmarks.md.
#   instructions  benchmarks/bench_instructions.sh [N]: the planner's work per 16-tenant plan of the
#               fleet in valgrind instructions (its first N mixes, default 100), and the plans' digest.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

usage() { sed -n '2,22p' "$0"; }
(($#)) || { usage >&2; exit 2; }
name="$1"
shift
case "$name" in
  -h|--help) usage; exit 0 ;;
  bringup) script=benchmarks/bench_bringup.py ;;
  planner|placement) script=benchmarks/bench_planner.py ;;
  imports) script=benchmarks/bench_imports.py ;;
  preview) script=benchmarks/bench_preview.py ;;
  payload) script=benchmarks/bench_payload.py ;;
  instructions) exec bash benchmarks/bench_instructions.sh "$@" ;;
  *) echo "bench: unknown benchmark '$name' (bringup, planner, imports, preview, payload, instructions)" >&2; usage >&2; exit 2 ;;
esac
# shellcheck source=scripts/env.sh
source scripts/env.sh
exec python3 "$script" "$@"
