"""The parsing parts of tests/gpu/readonly_check.sh (standard library only): what the NVIDIA tools
and lspci printed, read into what the fast-tenant features rely on, and set beside the collection's
host model. Reads files only; the check script saves the outputs first.

  readonly_parse.py topo TOPO_M QUERY_CSV HOST_TOPOLOGY_INFO
      ``nvidia-smi topo -m``'s GPU-NIC levels beside host_topology_info's gpu_nic_affinity, one
      line per GPU and NIC, "same" or "DIFFERS"
  readonly_parse.py modules NVIDIA_SMI_Q
      each GPU's "Module ID" from ``nvidia-smi -q`` (the Fabric Manager's physical ID on HGX
      boards), or "not printed" where this driver has no such line
  readonly_parse.py gpus [--json] QUERY_CSV
      the GPUs' PCI addresses from ``nvidia-smi --query-gpu=index,pci.bus_id,... --format=csv``
  readonly_parse.py pfs HOST_TOPOLOGY_INFO
      the ConnectX PFs (vendor 15b3, not a VF) of host_topology_info's nics
  readonly_parse.py acs LSPCI_VVV
      each device's ACS and ATS capability and control lines from ``lspci -D -vvv``, and whether
      its ACS control has Direct Translated P2P on and Translation Blocking off (what the boot
      stage's ``acs`` sets on the bridges of a GPU's path to its NIC: docs/tenants.md, "Fast tenants")

Formats, as in the fixtures of tests/fixtures (each with its .source.txt): ``nvidia-smi topo -m``
(tests/fixtures/topo: device columns GPU<n>/NIC<n> first, a "NIC Legend" naming each NIC's RDMA
device, or in older drivers the RDMA device names as column heads), ``nvidia-smi -q``
(tests/fixtures/nvidia_smi: "GPU 00000000:12:00.0" heads a GPU's block, "    Module ID   : 1" in
it), ``lspci -D -vvv`` (tests/fixtures/pci: a device's block starts with its address at column 0,
"Capabilities: [..] Access Control Services" with "ACSCap:"/"ACSCtl:" lines, "Address Translation
Service (ATS)" with "ATSCap:"/"ATSCtl:").
"""
from __future__ import annotations

import json
import re
import sys

DEVICE_COLUMN = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")
ADDRESS = re.compile(r"^([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")


def pci_address(text: str) -> str:
    """An address as nvidia-smi (8-digit domain) or lspci prints it -> 0000:07:00.0."""
    match = ADDRESS.match(text.strip())
    if not match:
        raise ValueError(f"not a PCI address: {text!r}")
    domain, bus, device, function = match.groups()
    return "%04x:%s:%s.%s" % (int(domain, 16), bus.lower(), device.lower(), function)


def parse_topo(text: str) -> dict:
    """``nvidia-smi topo -m`` -> {"columns": [device columns], "rows": {row: {column: level}},
    "nics": {NIC<n>: RDMA device}}; a column head that is an RDMA device name (older drivers)
    names itself."""
    lines = [line for line in text.splitlines() if line.strip()]
    # the head row's first cell is empty: it starts with blanks, then GPU0; a GPU's row starts with its name
    head = next((line for line in lines if line[:1].isspace() and line.split()[:1] == ["GPU0"]), None)
    if head is None:
        raise ValueError("no nvidia-smi topo -m header (a line of device columns starting with GPU0)")
    columns = []
    for word in head.split():
        if not DEVICE_COLUMN.match(word):
            break
        columns.append(word)
    rows = {}
    for line in lines:
        words = line.split()
        if line is head or not words or words[0] not in columns:
            continue
        rows[words[0]] = dict(zip(columns, words[1:1 + len(columns)]))
    nics = {}
    for line in lines:
        match = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", line)
        if match:
            nics[match.group(1)] = match.group(2)
    for column in columns:
        if not column.startswith(("GPU", "NIC")):
            nics.setdefault(column, column)
    return {"columns": columns, "rows": rows, "nics": nics}


def side_by_side(topo: dict, gpus: dict[str, str], model: dict) -> list[dict]:
    """The GPU-NIC levels of ``nvidia-smi topo -m`` (``topo``: parse_topo) beside the host model's
    (``model``: host_topology_info's result, its gpu_nic_affinity and nics' rdma_devices);
    ``gpus``: nvidia-smi's index -> PCI address. -> rows {gpu, gpu_address, nic, rdma, nic_address,
    nvidia_smi, host_model, same}; a NIC the model does not know by its RDMA device has no address."""
    affinity = model.get("gpu_nic_affinity") or {}
    by_rdma = {}
    for nic in model.get("nics") or []:
        for rdma in nic.get("rdma_devices") or []:
            by_rdma[rdma] = nic.get("address")
    out = []
    for row, levels in topo["rows"].items():
        if not row.startswith("GPU"):
            continue
        gpu_address = gpus.get(row[3:])
        for column, level in levels.items():
            if column.startswith("GPU"):
                continue
            rdma = topo["nics"].get(column, column)
            nic_address = by_rdma.get(rdma)
            ours = (affinity.get(gpu_address) or {}).get(nic_address) if gpu_address and nic_address else None
            out.append({"gpu": row, "gpu_address": gpu_address, "nic": column, "rdma": rdma, "nic_address": nic_address,
                        "nvidia_smi": level, "host_model": ours, "same": ours == level})
    return out


def module_ids(text: str) -> dict[str, str | None]:
    """``nvidia-smi -q`` -> {GPU address: its "Module ID" or None where the block has no such line}."""
    found: dict[str, str | None] = {}
    current = None
    for line in text.splitlines():
        head = re.match(r"^GPU ([0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line)
        if head:
            current = pci_address(head.group(1))
            found[current] = None
            continue
        match = re.match(r"^    Module ID\s*:\s*(\S.*?)\s*$", line)
        if match and current:
            found[current] = match.group(1)
    return found


def flags(text: str) -> dict[str, bool]:
    """'SrcValid+ TransBlk- ...' -> {'SrcValid': True, 'TransBlk': False, ...}."""
    return {word[:-1]: word.endswith("+") for word in text.replace(",", " ").split() if word[-1:] in "+-" and len(word) > 1}


def acs_ats(text: str) -> dict[str, dict]:
    """``lspci -D -vvv`` -> {address: {"name", "acs_cap", "acs_ctl", "ats_cap", "ats_ctl"}}, each
    capability line's text after its label, None where the device has none."""
    devices: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line and not line[0].isspace() and ADDRESS.match(line):
            address, name = (line.split(None, 1) + [""])[:2]
            current = devices.setdefault(pci_address(address), {
                "name": name.strip(), "acs_cap": None, "acs_ctl": None, "ats_cap": None, "ats_ctl": None})
            continue
        match = re.match(r"^\s+(ACSCap|ACSCtl|ATSCap|ATSCtl):\s*(.*?)\s*$", line)
        if match and current is not None:
            key = {"ACSCap": "acs_cap", "ACSCtl": "acs_ctl", "ATSCap": "ats_cap", "ATSCtl": "ats_ctl"}[match.group(1)]
            current[key] = match.group(2)
    return devices


def acs_verdict(device: dict) -> str:
    """What a device's ACS control says for ATS-translated peer traffic."""
    if device.get("acs_ctl") is None:
        return "no ACS capability"
    control = flags(device["acs_ctl"])
    if control.get("DirectTrans") and not control.get("TransBlk"):
        return "DirectTrans+ TransBlk-: translated requests may go straight through (as the boot stage's acs sets it)"
    return "DirectTrans%s TransBlk%s: not as the boot stage's acs sets it" % (
        "+" if control.get("DirectTrans") else "-", "+" if control.get("TransBlk") else "-")


def _model(path: str) -> dict:
    """host_topology_info's result from what ``ansible localhost -m`` printed (its JSON after 'localhost | ...')."""
    text = open(path, encoding="utf-8").read()
    start = text.find("{")
    if start < 0:
        raise ValueError(f"{path}: no JSON result of host_topology_info")
    result = json.loads(text[start:text.rindex("}") + 1])
    return result.get("topology") or result


def query_gpus(text: str) -> dict[str, str]:
    """``nvidia-smi --query-gpu=...,pci.bus_id,... --format=csv`` (a head line of the field names) ->
    {index: address}; without an index field, the rows' order (nvidia-smi lists GPUs by index)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    fields = [field.strip() for field in lines[0].split(",")]
    if "pci.bus_id" not in fields:
        raise ValueError("no pci.bus_id field in the query's head line: %r" % lines[0])
    out = {}
    for number, line in enumerate(lines[1:]):
        cells = dict(zip(fields, (cell.strip() for cell in line.split(","))))
        out[cells.get("index", str(number))] = pci_address(cells["pci.bus_id"])
    return out


def _gpus(path: str) -> dict[str, str]:
    return query_gpus(open(path, encoding="utf-8").read())


def connectx_pfs(model: dict) -> list[str]:
    """The host model's ConnectX PFs (vendor 15b3, not a VF)."""
    return [nic["address"] for nic in model.get("nics") or [] if nic.get("vendor_id") == "15b3" and not nic.get("is_vf")]


def main(argv: list[str]) -> int:
    if argv[:1] == ["gpus"] and len(argv) in (2, 3):
        addresses = list(_gpus(argv[-1]).values())
        print(json.dumps(addresses) if "--json" in argv else "\n".join(addresses))
        return 0
    if argv[:1] == ["pfs"] and len(argv) == 2:
        print("\n".join(connectx_pfs(_model(argv[1]))))
        return 0
    if len(argv) >= 4 and argv[0] == "topo":
        rows = side_by_side(parse_topo(open(argv[1], encoding="utf-8").read()), _gpus(argv[2]), _model(argv[3]))
        if not rows:
            print("  no GPU-NIC pair in nvidia-smi topo -m (no NIC column)")
        for row in rows:
            print("  %-5s %-13s %-6s %-9s %-13s nvidia-smi %-5s host model %-5s %s" % (
                row["gpu"], row["gpu_address"] or "?", row["nic"], row["rdma"], row["nic_address"] or "(not in model)",
                row["nvidia_smi"], row["host_model"] or "-", "same" if row["same"] else "DIFFERS"))
        return 0
    if len(argv) == 2 and argv[0] == "modules":
        ids = module_ids(open(argv[1], encoding="utf-8").read())
        for address, module in ids.items():
            print("  GPU %s Module ID %s" % (address, module if module is not None else "not printed by this driver"))
        return 0
    if len(argv) == 2 and argv[0] == "acs":
        for address, device in acs_ats(open(argv[1], encoding="utf-8").read()).items():
            print("  %s %s" % (address, device["name"]))
            print("    ACS: %s" % acs_verdict(device) + ("" if device["acs_ctl"] is None else " (ACSCtl %s)" % device["acs_ctl"]))
            print("    ATS: %s" % ("ATSCtl %s" % device["ats_ctl"] if device["ats_ctl"] is not None else "no ATS capability"))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
