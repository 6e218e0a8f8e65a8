#!/usr/bin/env bash
# Runs every test of the collection: ansible-test sanity, ansible-lint (production
# profile), the unit tests, and Molecule's lab scenario (a real kernel under QEMU).
# Installs what it needs first (as root on a fresh Debian 12 machine).
#
#   scripts/test.sh                 everything
#   scripts/test.sh sanity lint     only the named stages (sanity, lint, unit, lab)
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

bash scripts/bootstrap.sh || { echo "test: bootstrap failed" >&2; exit 2; }
source scripts/env.sh

stages=("$@")
((${#stages[@]})) || stages=(unit sanity lint lab)
passed=0 failed=0 failed_names=()

run_stage() {
  local name=$1; shift
  echo "=== test stage: $name"
  local start=$SECONDS
  "$@"
  local rc=$?
  echo "=== test stage: $name: rc=$rc in $((SECONDS - start)) s"
  if [[ $rc -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); failed_names+=("$name"); fi
}

unit_tests() {
  python -m pytest tests/unit -q
  local rc=$?
  # pytest exits 5 when it collected nothing: say so plainly rather than fail on a filter.
  if [[ $rc -eq 5 ]]; then echo "unit: no tests collected" >&2; return 0; fi
  return $rc
}

lint() { ansible-lint --profile production --offline; }

lab() {
  if [[ -f molecule/default/molecule.yml ]]; then
    molecule test -s default
  else
    echo "lab: no Molecule scenario in this checkout" >&2
    return 1
  fi
}

for stage in "${stages[@]}"; do
  case "$stage" in
    unit) run_stage unit unit_tests ;;
    sanity) run_stage sanity bash scripts/sanity.sh ;;
    lint) run_stage lint lint ;;
    lab) run_stage lab lab ;;
    *) echo "test: unknown stage '$stage' (sanity, lint, unit, lab)" >&2; exit 2 ;;
  esac
done

echo "stages: $passed passed, $failed failed"
((failed == 0)) || { echo "failed stages: ${failed_names[*]}" >&2; exit 1; }
