#!/usr/bin/env bash
# Read-only check for a machine with an NVIDIA GPU.
#
# Runs host_topology_info and mig_profile (CHECK MODE ONLY) through `ansible localhost`,
# prints what they saw, and saves the raw read-only nvidia-smi outputs next to them. For the
# fast-tenant features it also reads, and sets beside the collection's host model:
#   - `nvidia-smi topo -m`'s GPU-NIC levels beside host_topology_info's gpu_nic_affinity;
#   - each GPU's Module ID in `nvidia-smi -q` (the Fabric Manager's physical ID on HGX boards);
#   - NVLink status (`nvidia-smi nvlink -s`);
#   - the ACS and ATS capability and control of each GPU, the bridges above it and the ConnectX
#     PFs (`lspci -D -vvv`: config space read, nothing written);
#   - the boot stage's plan: its call as the inventory below gives it, checked by the preflight
#     gate in check mode (playbook written to <output-dir>, `ansible-playbook --check --diff`).
# The parsing is tests/gpu/readonly_parse.py (unit-tested on fixtures: tests/unit/tools).
# It never changes MIG mode, never creates or destroys instances, never resets a GPU:
# mig_profile only ever runs with --check, and the MIG state read before and after must
# be identical (the script fails otherwise).
#
# Usage: tests/gpu/readonly_check.sh [output-dir]
#   GPUVIRT_VENV        an existing virtualenv with ansible-core (default: <repo>/.venv);
#                       without one, an ansible-playbook on PATH is used; without that, a
#                       virtualenv is made in <output-dir>/venv from requirements.txt
#                       (ansible-core and PyYAML only; needs the package index).
#   MIG_LAYOUT_JSON     the mig_profile arguments to check, as JSON
#                       (default: every GPU with MIG as it is now, plus NVIDIA's
#                       mig-parted 'all-balanced' from tests/fixtures/mig-parted).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$(mktemp -d /tmp/gpuvirt-readonly.XXXXXX)}"
mkdir -p "$OUT"
NVSMI="$(command -v nvidia-smi || true)"
if [[ -z "$NVSMI" ]]; then
  echo "readonly_check: nvidia-smi is not on PATH: this is not a machine with a working NVIDIA driver" >&2
  exit 2
fi

# --- Ansible and the collection path (like scripts/bootstrap.sh, without system packages) ---
VENV="${GPUVIRT_VENV:-$REPO_ROOT/.venv}"
if [[ -x "$VENV/bin/ansible" ]]; then
  export PATH="$VENV/bin:$PATH"
  PYTHON="$VENV/bin/python"
elif command -v ansible >/dev/null 2>&1; then
  PYTHON="$(command -v python3)"
else
  echo "readonly_check: no ansible found; creating $OUT/venv"
  python3 -m venv "$OUT/venv"
  "$OUT/venv/bin/pip" install -q "$(grep -E '^ansible-core==' "$REPO_ROOT/requirements.txt")" "PyYAML>=6.0"
  export PATH="$OUT/venv/bin:$PATH"
  PYTHON="$OUT/venv/bin/python"
fi
COLLECTIONS="$OUT/collections"
mkdir -p "$COLLECTIONS/ansible_collections/gpuvirt"
ln -sfn "$REPO_ROOT" "$COLLECTIONS/ansible_collections/gpuvirt/tenancy"
export ANSIBLE_COLLECTIONS_PATH="$COLLECTIONS"
export ANSIBLE_LOCALHOST_WARNING=false ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_NOCOLOR=1
export ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.builtin.minimal ANSIBLE_CALLBACK_RESULT_FORMAT=json

# --- read-only nvidia-smi outputs (saved as they are) ---
QUERY=index,pci.bus_id,name,pci.device_id,mig.mode.current,mig.mode.pending
snapshot() {
  "$NVSMI" --query-gpu="$QUERY" --format=csv
  "$NVSMI" mig -lgi 2>&1 || true
  "$NVSMI" mig -lci 2>&1 || true
}
save() { # name, args...
  local name="$1"; shift
  { "$NVSMI" "$@" 2>&1 || echo "(exit status $?)"; } >"$OUT/$name.txt"
}
snapshot >"$OUT/state-before.txt"
save query-gpu --query-gpu="$QUERY" --format=csv
save lgip mig -lgip
save lgipp mig -lgipp
save lgi mig -lgi
save lci mig -lci
save nvidia-smi
save nvidia-smi-L -L
echo "== nvidia-smi --query-gpu=$QUERY"
cat "$OUT/query-gpu.txt"

# --- host_topology_info (an info module: reads sysfs/procfs only) ---
GPU_IDS="$("$NVSMI" --query-gpu=pci.device_id --format=csv,noheader | "$PYTHON" -c '
import sys
ids = set()
for line in sys.stdin:
    v = line.strip().lower()
    if v.startswith("0x") and len(v) == 10:
        ids.add("%s:%s" % (v[6:], v[2:6]))
print(",".join(sorted(ids)))')"
echo "== host_topology_info (gpu_ids: ${GPU_IDS:-none})"
if [[ -n "$GPU_IDS" ]]; then TOPO_ARGS="{\"gpu_ids\": [\"${GPU_IDS//,/\",\"}\"]}"; else TOPO_ARGS="{}"; fi
ansible localhost -c local --check -e "ansible_python_interpreter=$PYTHON" \
  -m gpuvirt.tenancy.host_topology_info -a "$TOPO_ARGS" >"$OUT/host_topology_info.txt" 2>&1 || true
"$PYTHON" - "$OUT/host_topology_info.txt" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
try:
    result = json.loads(text[text.index("{"):])
except ValueError:
    print(text)
    sys.exit(0)
topo = result.get("topology", {})
print("numa nodes:", [n.get("id") for n in topo.get("numa_nodes", [])], "iommu:", topo.get("iommu", {}).get("enabled"))
for g in topo.get("gpus", []):
    print("gpu", g.get("address"), g.get("model"), "numa", g.get("numa_node"), "iommu group", g.get("iommu_group"), "driver", g.get("driver"))
if result.get("failed"):
    print("host_topology_info failed:", result.get("msg"))
PY

# --- the fast-tenant features, read only ---
PARSE="$REPO_ROOT/tests/gpu/readonly_parse.py"
save topo-m topo -m
echo "== nvidia-smi topo -m beside host_topology_info's gpu_nic_affinity (GPU-NIC levels)"
"$PYTHON" "$PARSE" topo "$OUT/topo-m.txt" "$OUT/query-gpu.txt" "$OUT/host_topology_info.txt" || true
save q -q
echo "== Module IDs (nvidia-smi -q: the Fabric Manager's physical IDs on HGX boards)"
"$PYTHON" "$PARSE" modules "$OUT/q.txt" || true
save nvlink-s nvlink -s
echo "== NVLink status (nvidia-smi nvlink -s)"
cat "$OUT/nvlink-s.txt"
echo "== ACS and ATS of each GPU, the bridges above it and the ConnectX PFs (lspci -D -vvv, read only)"
if command -v lspci >/dev/null 2>&1; then
  : >"$OUT/lspci-vvv.txt"
  declare -A seen=()
  for dev in $("$PYTHON" "$PARSE" gpus "$OUT/query-gpu.txt") $("$PYTHON" "$PARSE" pfs "$OUT/host_topology_info.txt"); do
    # the device and every bridge on its sysfs path (pci0000:00/0000:00:01.0/.../DEV)
    for part in $(readlink -f "/sys/bus/pci/devices/$dev" | tr '/' ' '); do
      [[ $part =~ ^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$ && -z ${seen[$part]:-} ]] || continue
      seen[$part]=1
      lspci -D -vvv -s "$part" >>"$OUT/lspci-vvv.txt" 2>&1 || true
    done
  done
  "$PYTHON" "$PARSE" acs "$OUT/lspci-vvv.txt" || true
  [[ $(id -u) == 0 ]] || echo "  (not root: lspci shows no extended capabilities, so no ACS or ATS lines)"
else
  echo "  lspci not found (pciutils): ACS and ATS not read"
fi

# --- the boot stage's plan, checked by the preflight gate in check mode ---
# The inventory: this machine in gpuvirt_hosts, its NVIDIA GPUs as the tenant GPUs; nothing else.
echo "== the boot stage's plan (its call checked by the preflight gate, ansible-playbook --check --diff)"
GPU_ADDRESSES_JSON="$("$PYTHON" "$PARSE" gpus --json "$OUT/query-gpu.txt")"
cat >"$OUT/boot-plan-inventory.yml" <<INV
gpuvirt_hosts:
  hosts:
    localhost:
      ansible_connection: local
      ansible_python_interpreter: $PYTHON
INV
cat >"$OUT/boot-plan-vars.json" <<VARS
{"gpuvirt_gpu_pci_ids": $("$PYTHON" -c 'import json, sys; print(json.dumps([i for i in sys.argv[1].split(",") if i]))' "$GPU_IDS"),
 "gpuvirt_gpus": $GPU_ADDRESSES_JSON, "gpuvirt_reboot_ok": false,
 "gpuvirt_preflight_report_dir": "$OUT/preflight-reports"}
VARS
cat >"$OUT/boot-plan.yml" <<'PLAY'
---
- name: Boot plan | The boot stage's call checked by the preflight gate (check mode only)
  hosts: gpuvirt_hosts
  gather_facts: false
  tasks:
    - name: Boot plan | The boot stage's call from the inventory
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.host_boot
        tasks_from: options
    - name: Boot plan | The gate's read with that call checked in it
      ansible.builtin.import_role:
        name: gpuvirt.tenancy.preflight
      vars:
        preflight_fail: false
        preflight_stage_checks: "{{ {'boot': host_boot_call | default({})} | gpuvirt.tenancy.preflight_stage_calls }}"
    - name: Boot plan | What the boot stage would change
      ansible.builtin.debug:
        var: preflight_stage_checks_read
PLAY
ANSIBLE_STDOUT_CALLBACK=ansible.builtin.default ansible-playbook -i "$OUT/boot-plan-inventory.yml" --check --diff \
  -e "@$OUT/boot-plan-vars.json" "$OUT/boot-plan.yml" >"$OUT/boot-plan.txt" 2>&1 || echo "  (ansible-playbook exit status $?)"
sed -n '/What the boot stage would change/,$p' "$OUT/boot-plan.txt" | head -n 80

# --- mig_profile, CHECK MODE ONLY ---
check_mig() { # label, json-args
  echo "== mig_profile --check: $1"
  ansible localhost -c local --check --diff -e "ansible_python_interpreter=$PYTHON" \
    -m gpuvirt.tenancy.mig_profile -a "$2" >"$OUT/mig_profile-$1.txt" 2>&1 || true
  "$PYTHON" - "$OUT/mig_profile-$1.txt" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
try:
    start = text.index("{", text.index("localhost | "))
    result = json.loads(text[start:text.rindex("}") + 1])
except ValueError:
    print(text)
    sys.exit(0)
if result.get("failed"):
    print("  refused (nothing changed):", result.get("msg"))
for g in result.get("gpus", []):
    print("  GPU %s %s %s %s mig %s capable %s" % (g["index"], g["bus_id"], g["name"], g["device_id"], g["mig_mode"], g["mig_capable"]))
    print("    instances:", [(i["gpu_instance_id"], i["profile"], i["placement"], i["compute_instances"], i["processes"]) for i in g["instances_before"]])
    print("    would do:", g.get("actions") or "nothing", "| after:", g.get("instances_after"), "| reboot_required:", g.get("reboot_required"))
print("  changed (would change):", result.get("changed"), "warnings:", result.get("warnings"))
PY
}
if [[ -n "${MIG_LAYOUT_JSON:-}" ]]; then
  check_mig custom "$MIG_LAYOUT_JSON"
else
  # The layout each GPU has now (mode and instances, read with the collection's own
  # parsers): mig_profile must see nothing to do.
  AS_IS="$(PYTHONPATH="$COLLECTIONS" "$PYTHON" - "$OUT/query-gpu.txt" "$OUT/lgi.txt" <<'PY'
import json, sys
from collections import Counter
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import mig
gpus = mig.parse_query_csv(open(sys.argv[1]).read())
try:
    instances = mig.parse_lgi(open(sys.argv[2]).read())
except mig.NvidiaSmiError:
    instances = []
layout = []
for gpu in gpus:
    current = gpu.get("mig.mode.current")
    if current not in ("Enabled", "Disabled"):
        continue
    devices = Counter(gi["profile"] for gi in instances if gi["gpu"] == int(gpu["index"]))
    layout.append({"devices": [int(gpu["index"])], "mig_enabled": current == "Enabled", "mig_devices": dict(devices)})
print(json.dumps({"layout": layout}) if layout else "")
PY
)"
  if [[ -n "$AS_IS" ]]; then
    check_mig as-is "$AS_IS"
  else
    echo "== no MIG-capable GPU: mig_profile checked with a layout for all GPUs, MIG off"
    check_mig mig-off '{"layout": [{"devices": "all", "mig_enabled": false}]}'
  fi
  check_mig all-balanced "{\"config_file\": \"$REPO_ROOT/tests/fixtures/mig-parted/deployments_systemd_config-default.yaml\", \"config\": \"all-balanced\"}"
fi

# --- nothing may have changed ---
snapshot >"$OUT/state-after.txt"
if ! diff -u "$OUT/state-before.txt" "$OUT/state-after.txt"; then
  echo "readonly_check: MIG state CHANGED during a read-only check" >&2
  exit 1
fi
echo "== MIG state unchanged; outputs in $OUT"
