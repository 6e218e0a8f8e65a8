# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight: what BIOS and firmware must give a host before the collection changes it.

Pure functions over the host model of ``topology.read_topology`` (docs/CONTRACTS.md) and the
desired state (the ``gpuvirt_*`` inventory variables), plus the ConnectX firmware query that
``preflight_info`` runs on the host. Nothing here changes anything.

Checks and their verdicts:

- IOMMU: present (ACPI DMAR/IVRS table or ``/sys/class/iommu`` units) and enabled (IOMMU
  groups exist). Absent fails: the fix is in the BIOS (VT-d / AMD-Vi), or on a virtual machine
  (the host model's ``virtual_machine``) a virtual IOMMU its hypervisor gives it. Present but off is a
  warning by default (the boot stage turns it on with one reboot), a failure when the caller
  requires it on.
- GPUs and NIC PFs with their NUMA nodes; the GPUs given to tenants must exist.
- SR-IOV: each wanted PF exists, is SR-IOV capable and offers the wanted VF count.
- Isolation (ACS): each GPU and VF must be alone in its IOMMU group, bridges aside and
  other functions of the same multi-function device aside (they go along); a group shared
  with another endpoint means no ACS isolation between them: not isolated.
- ConnectX firmware: ``SRIOV_EN`` on and ``NUM_OF_VFS`` large enough, where mlxconfig or
  mstconfig is installed. What is missing there is a third kind
  of finding, ``boot``: the boot stage (role host_boot) sets and loads it, so it is listed under
  "will be fixed by the boot stage", not among the fixes by hand, and does not fail the host.
  "Fix by hand" stays for what the collection cannot do (BIOS settings, a failed query).
- Link type (VPI cards): each port whose mode the boot stage changes (``link_type`` of
  ``gpuvirt_sriov_pfs``), or a refusal the boot stage would give, decided by :mod:`port_modes`
  from the firmware query, else from the PF's netdev type in sysfs (a capture).
- Hugepage headroom per NUMA node: the node's memory against the wanted pools plus a
  reserve for the host.
- The tenant plan (``plan_tenants`` over the host as it will be: wanted VFs and hugepages
  added) and whether every tenant fits.
- The stages' own refusals: each host stage's call, checked in check mode by the gate
  (``preflight_info`` ``stage_checks``), that errs where the stage itself would stop the run with
  that error (:func:`standing_refusals`) fails the host, naming the stage, its refusal (the input
  and the fix, in the stage's words) and that the stage would stop there. A gate that passes
  followed by a stage that refuses would be a bug.
"""

from __future__ import absolute_import, division, print_function

from collections.abc import Mapping

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import port_modes
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, SYSFS_NAMES
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx.pf_lookup import wanted_vfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import lone_node
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import wanted_pages
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.text import port_change, render_table
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays

__metaclass__ = type

PASS, WARN, FAIL, INFO = "pass", "warn", "fail", "info"
# Will be fixed by the boot stage (role host_boot): not a failure, and not a fix by hand.
BOOT = "boot"
RANK = {PASS: 0, INFO: 0, BOOT: 1, WARN: 2, FAIL: 3}


def _check(name, status, detail, fix=None):
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def worst(statuses):
    result = PASS
    for status in statuses:
        if RANK[status] > RANK[result]:
            result = status
    return result


# ---------------------------------------------------------------------------- IOMMU
def iommu_status(topology, require_enabled=False):
    iommu = topology.get("iommu") or {}
    units = list(iommu.get("units") or [])
    table = iommu.get("firmware_table")
    enabled = bool(iommu.get("enabled"))
    present = enabled or bool(units) or table is not None
    vendor = topology.get("cpu_vendor")
    cmdline = topology.get("cmdline") or []
    args = [a for a in cmdline if a.split("=", 1)[0] in ("intel_iommu", "amd_iommu", "iommu")]
    machine = topology.get("virtual_machine")
    result = {"present": present, "enabled": enabled, "firmware_table": table, "units": units,
              "cpu_vendor": vendor, "cmdline_args": args, "groups": len(iommu.get("groups") or {}),
              "virtual_machine": machine}
    if enabled:
        result.update(status=PASS, fix=None,
                      detail="on: %d IOMMU groups, %s%s" % (result["groups"], table or "no ACPI table name",
                                                            (" (" + " ".join(args) + ")") if args else ""))
        return result
    if not present:
        if machine:
            # no setting inside the VM adds an IOMMU: the hypervisor emulates one (QEMU's intel-iommu,
            # as the lab VM has it: lab/lab.py), which needs q35 and, for interrupt remapping, a split irqchip
            fix = ("VM (%s): its hypervisor gives it no virtual IOMMU, and no setting inside the VM adds one. Give the VM an "
                   "emulated VT-d and start it again: QEMU -machine q35,kernel-irqchip=split -device "
                   "intel-iommu,intremap=on,caching-mode=on; libvirt <iommu model='intel'><driver intremap='on' "
                   "caching_mode='on'/></iommu> in <devices>, <ioapic driver='qemu'/> in <features>; then run preflight again"
                   % machine)
        elif vendor == "amd":
            fix = ("BIOS: the firmware gives no IVRS table. Enable the IOMMU (AMD-Vi, often 'IOMMU' or "
                   "'AMD-Vi' under the chipset/NBIO settings) and SVM in the BIOS/UEFI setup, then run preflight again")
        elif vendor == "intel":
            fix = ("BIOS: the firmware gives no DMAR table. Enable VT-d (Intel Virtualization Technology for "
                   "Directed I/O) in the BIOS/UEFI setup, then run preflight again")
        else:
            fix = ("BIOS: the firmware gives no DMAR/IVRS table. Enable VT-d (Intel) or AMD-Vi/IOMMU (AMD) in "
                   "the BIOS/UEFI setup, then run preflight again")
        result.update(status=FAIL, fix=fix,
                      detail="absent%s: no /sys/class/iommu units, no ACPI DMAR/IVRS table, no IOMMU groups"
                      % (" (a virtual machine: %s)" % machine if machine else ""))
        return result
    off = [a for a in args if a in ("intel_iommu=off", "amd_iommu=off")]
    if vendor == "amd":
        boot_fix = "boot args: %sadd iommu=pt" % ("remove %s, " % " ".join(off) if off else "")
    else:
        boot_fix = "boot args: %sadd intel_iommu=on iommu=pt" % ("remove %s, " % " ".join(off) if off else "")
    detail = "present (%s) but off%s: no IOMMU groups" % (
        table or "%d units" % len(units), (" (" + " ".join(args) + ")") if args else "")
    if require_enabled:
        # wanted on now (gpuvirt_require_iommu_enabled): a fix before this run, by hand
        result.update(status=FAIL, detail=detail, fix=boot_fix + " and reboot (or run the boot stage, role host_boot with "
                      "gpuvirt_reboot_ok, without gpuvirt_require_iommu_enabled)")
        return result
    # the boot stage's change, said once as its own (not also as a fix by hand)
    wanted = "iommu=pt" if vendor == "amd" else "intel_iommu=on iommu=pt"
    result.update(status=BOOT, detail=detail, fix="the boot stage sets %s%s on the kernel command line and reboots once "
                  "(role host_boot, gpuvirt_reboot_ok)" % (wanted, " (removing %s)" % " ".join(off) if off else ""))
    return result


# ---------------------------------------------------------------------------- isolation
def _slot(address):
    return address.rsplit(".", 1)[0]


def isolation(topology, address):
    """Is ``address`` alone in its IOMMU group? Bridges are not endpoints; other functions
    of the same multi-function device (neither of them a VF) go along with it."""
    pci = topology.get("pci_devices") or {}
    dev = pci.get(address) or {}
    if not (topology.get("iommu") or {}).get("enabled"):
        return {"group": None, "isolated": None, "peers": [], "companions": [],
                "detail": "unknown: the IOMMU is off (groups appear after the boot stage)"}
    group = dev.get("iommu_group")
    if group is None:
        return {"group": None, "isolated": False, "peers": [], "companions": [],
                "detail": "no IOMMU group"}
    others = group_endpoints(topology, address)
    companions = [o for o in others if _slot(o) == _slot(address) and not dev.get("physfn")
                  and not (pci.get(o) or {}).get("physfn")]
    peers = [o for o in others if o not in companions]
    if peers:
        detail = "group %s shared with %s (no ACS isolation)" % (group, ", ".join(peers))
    elif companions:
        detail = "group %s, with its own function(s) %s (they go along)" % (group, ", ".join(companions))
    else:
        detail = "group %s, alone" % group
    return {"group": group, "isolated": not peers, "peers": peers, "companions": companions, "detail": detail}


ACS_FIX = ("ACS: %s share an IOMMU group, so no tenant can get one without the other. Enable ACS (and ARI) in the "
           "BIOS, or move the card to a slot under a root port or PCIe switch with ACS; do not use pcie_acs_override "
           "for multi-tenant hosts")


# ---------------------------------------------------------------------------- firmware
def _fw_value(params, name, column):
    shown = (params.get(name) or {}).get(column)
    if shown is None:
        return None
    return mlx.parse_value(shown)["num"]


def firmware_verdict(pf, entry, num_vfs, totalvfs=None):
    """Status, detail and fix of one ConnectX PF's firmware for ``num_vfs`` wanted VFs. What the
    boot stage sets (SRIOV_EN, NUM_OF_VFS; the link type: :func:`check_port_modes`) and loads
    (firmware reset, else a cold boot it reports) is :data:`BOOT`, with what it will do as the fix.
    ``totalvfs``: the PF's sysfs sriov_totalvfs (the NUM_OF_VFS its firmware has now, SR-IOV on):
    without a firmware tool, what the boot stage then sets follows from it (it keeps a larger
    NUM_OF_VFS: mlxconfig.sriov_firmware)."""
    if entry is None:
        return INFO, "not queried", None
    setting = "SRIOV_EN=1 NUM_OF_VFS=%d" % num_vfs
    if entry["status"] == "tool not found":
        if not num_vfs:
            return INFO, "tool not found", None
        if totalvfs and totalvfs >= num_vfs:
            return BOOT, "tool not found; SR-IOV on, sysfs offers %d VFs (sriov_totalvfs)" % totalvfs, (
                "the boot stage installs mstflint (mstconfig) to read the firmware; SR-IOV needs no firmware change")
        if totalvfs:
            return BOOT, "tool not found; SR-IOV on, sysfs offers %d VFs (sriov_totalvfs)" % totalvfs, (
                "the boot stage installs mstflint (mstconfig) and raises NUM_OF_VFS from %d to %d in the firmware"
                % (totalvfs, num_vfs))
        return BOOT, "tool not found", "the boot stage installs mstflint (mstconfig) and sets %s in the firmware" % setting
    if entry["status"] != "ok":
        return (WARN if num_vfs else INFO), "query failed: %s" % entry["message"], None
    params = entry["params"]
    cur_en, next_en = _fw_value(params, "SRIOV_EN", "current"), _fw_value(params, "SRIOV_EN", "next")
    cur_n, next_n = _fw_value(params, "NUM_OF_VFS", "current"), _fw_value(params, "NUM_OF_VFS", "next")
    detail = "SRIOV_EN=%s NUM_OF_VFS=%s" % (cur_en if cur_en is not None else "?", cur_n if cur_n is not None else "?")
    if (next_en, next_n) != (cur_en, cur_n):
        detail += " (next boot: SRIOV_EN=%s NUM_OF_VFS=%s)" % (next_en, next_n)
    links = [(name, params[name]) for name in mlx.LINK_TYPE_PARAMS if name in params]
    if links:
        detail += " " + " ".join("%s=%s" % (name, shown.get("current")) for name, shown in links)
    if not num_vfs:
        return INFO, detail, None
    current_ok = cur_en == 1 and (cur_n or 0) >= num_vfs
    next_ok = next_en == 1 and (next_n or 0) >= num_vfs
    load = ("then loads it with a firmware reset (mlxfwreset/mstfwreset) before its reboot, or reports that the host "
            "needs a cold boot (power-cycle)")
    if current_ok:
        return PASS, detail, None
    if next_ok:
        return BOOT, detail, ("the boot stage loads the settings made for the next boot only: it %s"
                              % load.replace("then ", ""))
    return BOOT, detail, ("the boot stage sets %s in the firmware (gpuvirt.tenancy.mlx_rocev2, like mlxconfig -d %s set "
                          "SRIOV_EN=1 NUM_OF_VFS=%d), %s" % (setting, pf, num_vfs, load))


def firmware_sriov_on(entry):
    """Whether the queried firmware has SR-IOV on now (None: not known)."""
    if not entry or entry.get("status") != "ok":
        return None
    return _fw_value(entry["params"], "SRIOV_EN", "current") == 1


# ---------------------------------------------------------------------------- the report
def _pages_mb(counts):
    """{"2M": n, "1G": m} -> MiB."""
    return sum((counts.get(size) or 0) * kb // 1024 for size, kb in SIZES_KB.items())


class HostModel:
    """What every check reads: the host model, the desired state (gpus, sriov_pfs,
    hugepages, tenants, require_iommu_enabled, host_reserved_mb), the firmware query and the
    planner's answer. The few facts several checks share are worked out once here."""

    def __init__(self, topology, desired=None, firmware=None, plan=None, plan_error=None, stage_checks=None):
        self.topology = topology
        self.stage_checks = stage_checks or {}
        self.desired = dict(desired or {})
        self.firmware = firmware or {}
        self.plan = plan
        self.plan_error = plan_error
        self.pci = topology.get("pci_devices") or {}
        self.iommu = iommu_status(topology, bool(self.desired.get("require_iommu_enabled")))
        self.gpus = [self._gpu(gpu) for gpu in topology.get("gpus") or []]
        wanted_gpus = self.desired.get("gpus")
        self.tenant_gpus = list(wanted_gpus) if wanted_gpus else [g["address"] for g in self.gpus]
        self.wanted_vfs = wanted_vfs(topology, self.desired.get("sriov_pfs"))

    def _gpu(self, gpu):
        iso = isolation(self.topology, gpu["address"])
        return {"address": gpu["address"], "model": gpu.get("model") or "%s:%s" % (gpu.get("vendor_id"), gpu.get("device_id")),
                "numa_node": gpu.get("numa_node"), "iommu_group": gpu.get("iommu_group"), "driver": gpu.get("driver"),
                "isolated": iso["isolated"], "isolation": iso["detail"], "group_peers": iso["peers"]}


def check_iommu(model):
    iommu = model.iommu
    return {"iommu": iommu}, [_check("iommu", iommu["status"], iommu["detail"], iommu["fix"])]


def check_gpus(model):
    gpus, wanted_gpus = model.gpus, model.desired.get("gpus")
    known = [g["address"] for g in gpus]
    missing = [g for g in (wanted_gpus or []) if g not in known]
    if missing:
        finding = _check("gpus", FAIL, "%s not found as GPUs (found: %s)" % (", ".join(missing), ", ".join(known) or "none"),
                         "inventory: fix gpuvirt_gpus, or add the GPU's vendor:device to gpuvirt_gpu_pci_ids")
    elif not gpus:
        finding = _check("gpus", WARN if wanted_gpus is None else INFO, "no GPUs found", None)
    else:
        # a device with no node (sysfs numa_node -1) sits on a one-node host's node, as the planner places it
        only = lone_node(model.topology)
        listed = ", ".join("%s node %s" % (g["address"], g["numa_node"] if g["numa_node"] is not None else
                                           "%s (sysfs -1, the host's one node)" % only if only is not None else "unknown (sysfs -1)")
                           for g in gpus)
        nodeless = [g["address"] for g in gpus if g["numa_node"] is None and only is None and g["address"] in model.tenant_gpus]
        if nodeless:
            finding = _check("gpus", WARN, "%s; no NUMA node counts the %d tenant GPU(s) of unknown node (sysfs numa_node -1): only "
                             "tenants with numa: preferred get them (placed split)" % (listed, len(nodeless)),
                             "give the tenants numa: preferred (gpuvirt_tenant_policy, or the tenant's numa), or have the "
                             "firmware/BIOS report the PCIe roots' NUMA node (ACPI _PXM)")
        else:
            finding = _check("gpus", PASS, listed, None)
    return {"gpus": gpus}, [finding]


def check_nics(model):
    """The NIC physical functions, for the report (no verdict)."""
    nics = []
    for nic in model.topology.get("nics") or []:
        if nic.get("is_vf"):
            continue
        nics.append({"address": nic["address"], "model": nic.get("model") or "%s:%s" % (nic.get("vendor_id"), nic.get("device_id")),
                     "numa_node": nic.get("numa_node"), "netdevs": nic.get("netdevs") or [], "driver": nic.get("driver"),
                     "connectx": nic.get("vendor_id") == pci_ids.MELLANOX,
                     "sriov_totalvfs": nic.get("sriov_totalvfs"), "sriov_numvfs": nic.get("sriov_numvfs")})
    return {"nics": nics}, []


def _sriov_verdict(address, dev, want, connectx, firmware=None):
    """Status, detail and fix of one SR-IOV capable (or wanted) PF. On a ConnectX whose firmware
    does not (or may not) allow the VFs, the boot stage sets the firmware: :data:`BOOT`."""
    if dev is None:
        return FAIL, "not found on this host", "inventory: fix the pf of gpuvirt_sriov_pfs (a PCI address or netdev of this host)"
    fw_on = firmware_sriov_on(firmware) if connectx else None
    fw_vfs = _fw_value((firmware or {}).get("params") or {}, "NUM_OF_VFS", "current") if fw_on else None
    if not dev.get("sriov_totalvfs"):
        if connectx and want and fw_on is not True:
            return BOOT, "not SR-IOV capable now (SR-IOV off in the ConnectX firmware%s)" % ("" if fw_on is False else "?"), (
                "the boot stage sets SRIOV_EN=1 NUM_OF_VFS=%d in the firmware and loads it; if the PF still offers no VFs "
                "afterwards, enable SR-IOV in the BIOS" % want)
        return FAIL, "not SR-IOV capable (no sriov_totalvfs)", (
            "BIOS: enable SR-IOV (and for ConnectX the firmware: mlxconfig -d %s set SRIOV_EN=1 NUM_OF_VFS=%d), "
            "then power-cycle" % (address, want or 1))
    if want is not None and want > dev["sriov_totalvfs"]:
        detail = "%d VFs wanted, the PF offers %d (sriov_totalvfs)" % (want, dev["sriov_totalvfs"])
        if connectx and (fw_vfs is None or fw_vfs < want):
            return BOOT, detail, "the boot stage raises NUM_OF_VFS to %d in the firmware and loads it" % want
        return FAIL, detail, (
            ("firmware: raise NUM_OF_VFS (mlxconfig -d %s set NUM_OF_VFS=%d) and power-cycle, or lower num_vfs in "
             "gpuvirt_sriov_pfs" % (address, want)) if connectx else "inventory: lower num_vfs in gpuvirt_sriov_pfs")
    return (PASS if want is not None else INFO), "sriov_totalvfs %s, %s VFs now%s" % (
        dev["sriov_totalvfs"], dev.get("sriov_numvfs") or 0, ", %d wanted" % want if want is not None else ""), None


def check_sriov(model):
    """SR-IOV capable PFs and the wanted ones, with the ConnectX firmware of each."""
    pci, wanted_vfs, firmware = model.pci, model.wanted_vfs, model.firmware
    sriov, findings = [], []
    for address in sorted(set(a for a, d in pci.items() if d.get("sriov_totalvfs") and not d.get("physfn")) | set(wanted_vfs)):
        dev = pci.get(address)
        want = wanted_vfs.get(address)
        entry = {"address": address, "model": (dev or {}).get("model"), "numa_node": (dev or {}).get("numa_node"),
                 "sriov_totalvfs": (dev or {}).get("sriov_totalvfs"), "sriov_numvfs": (dev or {}).get("sriov_numvfs"),
                 "wanted_vfs": want, "connectx": bool(dev) and mlx.is_connectx_pf(dev)}
        status, detail, fix = _sriov_verdict(address, dev, want, entry["connectx"], firmware.get(address))
        if entry["connectx"]:
            fw_status, fw_detail, fw_fix = firmware_verdict(address, firmware.get(address), want or 0,
                                                            (dev or {}).get("sriov_totalvfs"))
            entry["firmware"] = dict(firmware.get(address) or {}, verdict=fw_status, detail=fw_detail)
            if fw_status in (WARN, FAIL, BOOT) or want:
                findings.append(_check("firmware %s" % address, fw_status, fw_detail, fw_fix))
        entry.update(status=status, detail=detail)
        sriov.append(entry)
        if want is not None or status in (FAIL, BOOT):
            findings.append(_check("sriov %s" % address, status, detail, fix))
    return {"sriov_pfs": sriov, "firmware": firmware}, findings


def check_port_modes(model):
    """The ports of the ConnectX PFs that want VFs whose link type the boot stage changes (BOOT),
    or that it refuses to leave as they are (FAIL), decided as the boot stage decides
    (:mod:`port_modes`); nothing when no port changes."""
    try:
        pfs = port_modes.plan(model.topology, model.desired.get("sriov_pfs"), model.firmware)
    except InputError as exc:
        return {"port_modes": []}, [_check("link type", FAIL, str(exc), "inventory: fix gpuvirt_sriov_pfs")]
    findings = []
    for entry in pfs:
        name = "link type %s" % entry["pf"]
        read = "modes read from the %s" % ("firmware" if entry["source"] == "firmware" else "netdevs (sysfs)")
        if entry["refusal"]:
            findings.append(_check(name, FAIL, "ports not Ethernet; %s" % read, entry["refusal"]))
        elif entry["changes"]:
            findings.append(_check(name, BOOT, "%s; %s" % ("; ".join(port_change(c) for c in entry["changes"]), read),
                                   "the boot stage %s; the ports switch at the next firmware load" % (
                                       "sets LINK_TYPE ETH in the firmware (link_type: eth)" if entry["link_type"] == "eth"
                                       else "loads the link type the firmware holds for the next boot")))
    return {"port_modes": [c for e in pfs for c in e["changes"]]}, findings


def check_isolation(model):
    """The tenant GPUs and the VFs of the wanted PFs, each alone in its IOMMU group."""
    pci = model.pci
    vfs = []
    for pf in sorted(model.wanted_vfs):
        for vf in (pci.get(pf) or {}).get("virtfns") or []:
            iso = isolation(model.topology, vf)
            vfs.append({"address": vf, "pf": pf, "numa_node": (pci.get(vf) or {}).get("numa_node"),
                        "iommu_group": (pci.get(vf) or {}).get("iommu_group"), "driver": (pci.get(vf) or {}).get("driver"),
                        "isolated": iso["isolated"], "isolation": iso["detail"], "group_peers": iso["peers"]})
    isolated_devices = [g for g in model.gpus if g["address"] in model.tenant_gpus] + vfs
    shared = [d for d in isolated_devices if d["isolated"] is False]
    if not model.iommu["enabled"]:
        finding = _check("isolation", WARN if isolated_devices or model.wanted_vfs else INFO,
                         "not checked: the IOMMU is off (run preflight again after the boot stage)", None)
    elif shared:
        finding = _check("isolation", FAIL, "; ".join("%s: %s" % (d["address"], d["isolation"]) for d in shared),
                         ACS_FIX % ", ".join(sorted(set(d["address"] for d in shared)
                                                    | set(p for d in shared for p in d["group_peers"]))))
    else:
        finding = _check("isolation", PASS if isolated_devices else INFO,
                         "%d GPU(s) and %d VF(s) each in their own IOMMU group" % (
                             len([d for d in isolated_devices if d not in vfs]), len(vfs)), None)
    return {"vfs": vfs}, [finding]


def _node_headroom(node, want, reserve):
    """One NUMA node's pools now, after the wanted pages, and what is left for the host."""
    pools = node.get("hugepages") or {}
    current = dict((size, {"total": (pools.get(key) or {}).get("total", 0), "free": (pools.get(key) or {}).get("free", 0),
                           "supported": (pools.get(key) or {}).get("supported", True)})
                   for size, key in SYSFS_NAMES.items())
    after_mb = _pages_mb(dict((size, max(current[size]["total"], want.get(size, 0))) for size in SIZES_KB))
    memory = node.get("memory_mb") or 0
    return {"node": int(node["id"]), "memory_mb": memory, "hugepages": current, "wanted": want,
            "hugepages_mb_after": after_mb, "host_reserved_mb": reserve, "headroom_mb": memory - after_mb - reserve}


def check_hugepages(model):
    """Hugepage headroom per NUMA node: memory against the wanted pools plus the host's reserve."""
    wanted, unknown_nodes = wanted_pages(model.topology, model.desired.get("hugepages"))
    reserve = int(model.desired.get("host_reserved_mb") or 0)
    nodes, findings = [], []
    for node in model.topology.get("numa_nodes") or []:
        entry = _node_headroom(node, wanted.get(int(node["id"]), {}), reserve)
        want, current, node_id = entry["wanted"], entry["hugepages"], entry["node"]
        unsupported = [s for s in want if want[s] and not current[s]["supported"]]
        if entry["headroom_mb"] < 0:
            entry["status"] = FAIL
            findings.append(_check("hugepages node %d" % node_id, FAIL,
                                   "%d MiB of memory, %d MiB of hugepages wanted and %d MiB kept for the host"
                                   % (entry["memory_mb"], entry["hugepages_mb_after"], reserve),
                                   "inventory: lower gpuvirt_hugepages on node %d (or the host reserve), or add memory to the node" % node_id))
        elif unsupported:
            entry["status"] = WARN
            findings.append(_check("hugepages node %d" % node_id, WARN, "%s pages not offered by the kernel on this node" % ", ".join(unsupported),
                                   "boot args: hugepagesz=1G (the boot stage reserves 1G pages at boot)"))
        else:
            entry["status"] = PASS
        nodes.append(entry)
    if unknown_nodes:
        findings.append(_check("hugepages", FAIL, "gpuvirt_hugepages names NUMA node(s) %s, which this host lacks (nodes: %s)"
                               % (", ".join(str(n) for n in unknown_nodes), ", ".join(str(n["node"]) for n in nodes)),
                               "inventory: fix the node of gpuvirt_hugepages"))
    elif wanted and any(wanted.values()) and not any(n["status"] == FAIL for n in nodes):
        findings.append(_check("hugepages", PASS, "; ".join("node %d: %d MiB headroom" % (n["node"], n["headroom_mb"]) for n in nodes), None))
    return {"numa_nodes": nodes}, findings


def check_plan(model):
    """The tenant plan over the host as the host stages will leave it."""
    tenants = [t for t in model.desired.get("tenants") or [] if not isinstance(t, Mapping) or stays(t)]
    plan = model.plan
    # the variable the tenants came from: gpuvirt_tenants, or the survey's gpuvirt_survey_tenants
    source = model.desired.get("tenants_from") or "gpuvirt_tenants"
    if model.plan_error:
        return ({"plan": {"fits": False, "error": model.plan_error, "placements": {}, "unplaced": {}, "tenants_from": source}},
                [_check("plan", FAIL, model.plan_error, "inventory: fix %s / gpuvirt_tenant_policy" % source)])
    if not tenants:
        return ({"plan": {"fits": True, "placements": {}, "unplaced": {}, "tenants": 0, "tenants_from": source}},
                [_check("plan", INFO, "no tenants in %s" % source, None)])
    if plan is None:
        return ({"plan": {"fits": None, "placements": {}, "unplaced": {}, "tenants": len(tenants), "tenants_from": source}},
                [_check("plan", WARN, "not planned (the planner gpuvirt.tenancy.plan_tenants is not available)", None)])
    unplaced = plan.get("unplaced") or {}
    placements = dict((name, {"numa_node": p.get("numa_node"), "numa_nodes": p.get("numa_nodes") or [p.get("numa_node")],
                              "cells": p.get("cells"), "gpus": p.get("gpus") or [], "vfs": p.get("vfs") or [],
                              "cpus": p.get("cpus") or [], "emulator_cpus": p.get("emulator_cpus") or [],
                              "hugepages": p.get("hugepages"), "local": p.get("local"), "pcie_affinity": p.get("pcie_affinity"),
                              "vf_locality": p.get("vf_locality"), "nvswitch_partition": p.get("nvswitch_partition")})
                      for name, p in (plan.get("placements") or {}).items())
    section = {"fits": not unplaced, "placements": placements, "unplaced": unplaced, "tenants": len(tenants),
               "notes": plan.get("notes") or [], "tenants_from": source}
    if unplaced:
        # each tenant's reason is said once: in the report's plan (and the table's tenant plan)
        finding = _check("plan", FAIL, "%s (why: the tenant plan)" % "; ".join("%s does not fit" % n for n in sorted(unplaced)),
                         "inventory: shrink or move those tenants (%s), or free resources" % source)
    else:
        finding = _check("plan", PASS, "fits: %s" % ", ".join(
            "%s on node%s %s" % (n, "s" if len(p["numa_nodes"]) > 1 else "", ",".join(map(str, p["numa_nodes"])))
            for n, p in sorted(placements.items())), None)
    return {"plan": section}, [finding]


# ---------------------------------------------------------------------------- the stages' refusals
STAGE_ORDER = ("boot", "sriov_vfio", "libvirt_mounts", "tenants")
STAGE_WORDS = {"boot": "boot", "sriov_vfio": "SR-IOV/VFIO", "libvirt_mounts": "tenants (libvirt's hugetlbfs mounts)",
               "tenants": "tenants"}
ERROR_KINDS = ("InputError: ", "StateError: ", "CommandError: ")


def standing_refusals(stage_checks):
    """[(stage, check)] of the gate's stage checks (preflight_info's ``stage_checks``) that err
    where the stage's own call, later in this run, would give the same refusal and stop the run:

    - the boot stage's, always (it comes first: its call meets the host the gate read);
    - the SR-IOV/VFIO stage's, unless the boot stage's check says a reboot (or a firmware load)
      comes first: the stage then runs on the host as that reboot leaves it (in a preview: planned
      after the boot stage, role host_stages);
    - the libvirt host role's hugetlbfs mounts, on the same terms (a page size the kernel offers
      only after the boot stage's hugepagesz= is there after its reboot);
    - the tenants stage's in a preview (its call plans on the host as the earlier stages will
      leave it), else while the earlier stages' checks ran without error and change nothing (its
      call then meets the host the gate read)."""
    checks = dict((stage, check) for stage, check in (stage_checks or {}).items() if isinstance(check, dict))
    boot = (checks.get("boot") or {}).get("result") or {}
    reboot_first = bool(boot.get("reboot_required") or boot.get("firmware_pending"))
    settled = all(not check.get("error") and check.get("changed") is False
                  for stage, check in checks.items() if stage in ("boot", "sriov_vfio"))
    standing = []
    for stage in STAGE_ORDER:
        check = checks.get(stage)
        if not check or not check.get("error"):
            continue
        if stage in ("sriov_vfio", "libvirt_mounts") and reboot_first:
            # the host the call meets is the one the boot stage's reboot leaves (its hugepage sizes too)
            continue
        if stage == "tenants" and (check.get("options") or {}).get("preview") is None and not settled:
            continue
        standing.append((stage, check))
    return standing


def refusal_text(error):
    """A check's ``error`` without the collection's error kind (the stage's own words remain)."""
    text = str(error or "")
    for kind in ERROR_KINDS:
        if text.startswith(kind):
            return text[len(kind):]
    return text


def check_stage_refusals(model):
    """A FAIL per stage whose call the gate checked and that refuses it (:func:`standing_refusals`)."""
    findings = []
    source = model.desired.get("tenants_from") or "gpuvirt_tenants"
    inputs = {"boot": "the boot stage's inputs (gpuvirt_gpu_pci_ids, gpuvirt_gpus, gpuvirt_host_gpus, gpuvirt_sriov_pfs, "
                      "gpuvirt_hugepages)",
              "sriov_vfio": "the SR-IOV/VFIO stage's inputs (gpuvirt_sriov_pfs, %s, gpuvirt_gpus)" % source,
              "tenants": "the tenants stage's inputs (%s, gpuvirt_tenant_policy, gpuvirt_sriov_pfs)" % source,
              "libvirt_mounts": "the libvirt host role's hugetlbfs mounts (libvirt_host_hugetlbfs_mounts, from %s and "
                                "gpuvirt_tenant_policy's hugepage_size)" % source}
    for stage, check in standing_refusals(model.stage_checks):
        findings.append(_check(
            "stage %s" % stage, FAIL,
            "the %s stage (%s) refuses this run's call: %s" % (STAGE_WORDS[stage], check.get("module"), refusal_text(check["error"])),
            "%s: as the refusal says, then run again; this run would stop in the %s stage with it" % (inputs[stage], STAGE_WORDS[stage])))
    return {"stage_refusals": [f["name"][len("stage "):] for f in findings]}, findings


# The preflight, in report order: each check reads the HostModel and returns
# ({report section: value}, [findings]).
CHECKS = (check_iommu, check_gpus, check_nics, check_sriov, check_port_modes, check_isolation, check_hugepages, check_plan,
          check_stage_refusals)


def evaluate(topology, desired=None, firmware=None, plan=None, plan_error=None, stage_checks=None):
    """The preflight report of one host (a dict, JSON-ready). ``desired`` holds gpus,
    sriov_pfs, hugepages, tenants, tenants_from, require_iommu_enabled, host_reserved_mb;
    ``stage_checks``: preflight_info's, whose standing refusals fail the host."""
    model = HostModel(topology, desired, firmware, plan, plan_error, stage_checks)
    checks = []
    report = {"host": model.desired.get("host"), "kernel_release": topology.get("kernel_release"),
              "boot_id": topology.get("boot_id"), "cpu_vendor": topology.get("cpu_vendor"), "checks": checks}
    for check in CHECKS:
        sections, findings = check(model)
        report.update(sections)
        checks.extend(findings)
    report["status"] = worst(c["status"] for c in checks)
    report["failures"] = ["%s: %s" % (c["name"], c["detail"]) for c in checks if c["status"] == FAIL]
    report["warnings"] = ["%s: %s" % (c["name"], c["detail"]) for c in checks if c["status"] == WARN]
    report["fixes"] = ["%s: %s" % (c["name"], c["fix"]) for c in checks if c["fix"] and c["status"] in (FAIL, WARN)]
    report["boot_stage"] = ["%s: %s" % (c["name"], c["fix"]) for c in checks if c["fix"] and c["status"] == BOOT]
    report["table"] = render_table(report)
    return report
