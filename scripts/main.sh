#!/usr/bin/env bash
# The main command: from a fresh clone, install what is needed (scripts/bootstrap.sh),
# build and boot the lab host (a QEMU VM standing in for a GPU server, see docs/lab.md),
# run playbooks/site.yml against it, and print a short report: tasks changed, reboots,
# topology, tenant placement; then how to ssh in and how to stop the lab. Then the tenant bench
# (lab/tenant_bench.py, docs/lab.md): tenants booted by this machine's own libvirt, the tenants
# stage and the guest stages run for real, its report one line per tenant.
#
# usage: scripts/main.sh [--fresh] [--stop] [--no-bench] [PLAYBOOK] [-- ANSIBLE_PLAYBOOK_ARGS...]
#   --fresh     restart the lab from a bare disk even if it is already running
#   --stop      stop the lab and take the bench down at the end (the default leaves both running)
#   --no-bench  the lab only
#   PLAYBOOK    default molecule/default/converge.yml: playbooks/site.yml as the Molecule
#               scenario runs it on the lab (boot stage first, then the whole site.yml)
# Needs root the first time (Debian packages, image build). Lab state: ${GPUVIRT_LAB_DIR:-.lab}.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

fresh=0 stop_after=0 bench=1 playbook=molecule/default/converge.yml
extra=()
while (($#)); do
  case "$1" in
    --fresh) fresh=1 ;;
    --stop) stop_after=1 ;;
    --no-bench) bench=0 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) playbook="$1" ;;
  esac
  shift
done
[[ -f "$playbook" ]] || { echo "main: no playbook $playbook" >&2; exit 2; }

started=$(date +%s)
step() { printf '\n==== [%4ss] %s\n' "$(($(date +%s) - started))" "$*"; }

step "bootstrap (Debian packages, virtualenv, collection path)"
scripts/bootstrap.sh
# The lab's QEMU 10.0 from bookworm-backports (igb, PCIe switch, ivshmem); a no-op once there.
# scripts/bootstrap.sh is to call this itself; until then the main command does.
lab/install-qemu.sh
# shellcheck source=scripts/env.sh
source scripts/env.sh

LAB=(python3 "$REPO_ROOT/lab/lab.py")
booted_here=0
on_exit() {
  local rc=$?
  if ((rc != 0 && booted_here)) && [[ $rc -eq 130 ]]; then
    echo "main: interrupted: stopping the lab" >&2
    "${LAB[@]}" stop || true
  fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM

if ((fresh)); then
  "${LAB[@]}" stop
fi
if "${LAB[@]}" status >/dev/null 2>&1; then
  step "the lab is already running: converging it as it is (--fresh for a bare one)"
  "${LAB[@]}" wait --timeout 600
else
  step "build the lab image (cached by recipe) and boot the lab"
  booted_here=1
  "${LAB[@]}" up
fi

boot_id_before="$("${LAB[@]}" ssh cat /proc/sys/kernel/random/boot_id)"
echo "main: lab QEMU: $(cat "$("${LAB[@]}" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["lab_dir"])')/run/qemu.version" 2>/dev/null || echo unknown)"
starts_before="$(python3 lab/report.py --log /dev/null --kernel-starts)"
resets_before="$(python3 lab/report.py --log /dev/null --stall-resets)"
log_file="$("${LAB[@]}" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["lab_dir"])')/run/main-$(date +%Y%m%d-%H%M%S).log"

step "ansible-playbook $playbook (log: $log_file)"
rc=0
# pipefail: rc is ansible-playbook's status (tee does not fail).
ansible-playbook -i inventories/lab/ "$playbook" "${extra[@]}" 2>&1 | tee "$log_file" || rc=$?

step "report"
python3 lab/report.py --log "$log_file" --boot-id-before "$boot_id_before" --kernel-starts-before "$starts_before" \
  --stall-resets-before "$resets_before"
booted_here=0
if ((stop_after)); then
  "${LAB[@]}" stop
fi
if ((rc != 0)); then
  echo "main: ansible-playbook failed (exit $rc); the lab is left running to look into it" >&2
fi

bench_rc=0
if ((bench)); then
  step "the tenant bench: tenants booted by this machine's libvirt, the tenants and guest stages (lab/tenant_bench.py)"
  bench_args=(run)
  ((stop_after)) && bench_args+=(--down-after)
  python3 lab/tenant_bench.py "${bench_args[@]}" || bench_rc=$?
  ((stop_after)) || echo "main: the bench's tenants are left running: python3 lab/tenant_bench.py status | down"
fi
((rc != 0)) && exit "$rc"
exit "$bench_rc"
