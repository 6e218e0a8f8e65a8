# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Fabric Manager service VM of an HGX board with NVSwitches (the tenants stage's ``fabric_vm``),
checked against the host model and the tenant list. Pure: no I/O.

In the Shared NVSwitch virtualization model (NVIDIA Fabric Manager user guide, "Shared NVSwitch
Virtualization Model", https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html)
the board's NVSwitches are passed through to a service VM that runs the Fabric Manager, and the
tenants get only GPUs. What is used here, and where it is written:

- the service VM holds the NVSwitch functions only, bound to vfio-pci on the host, GPUs going to the
  tenant VMs (OpenNebula's service VM on an HGX H100 host, NVSwitches ``10de:22a3``: its
  ``one_fabricmanager.md``, github.com/OpenNebula/website, content/product/cluster_configuration/
  hosts_and_clusters/one_fabricmanager.md);
- inside it, the NVIDIA driver and the Fabric Manager (josepselga/NVIDIA-FabricManager-partition-tool,
  README.md, "On a VM, you will need: NVidia driver, NVidia Fabric manager"), its configuration
  ``/usr/share/nvidia/nvswitch/fabricmanager.cfg`` with ``FABRIC_MODE=1`` (the same README), whose
  values NVIDIA's variables reference gives (CumulusNetworks/docs,
  content/cumulus-netq-48/NVLink4/Edit-GFM-Variables.md: ``FABRIC_MODE`` 1 "Start Fabric Manager in
  Shared NVSwitch multitenancy mode"; ``FM_CMD_BIND_INTERFACE`` "Network interface to listen for
  Fabric Manager SDK/API", "A valid IPv4 address. By default, uses loopback (127.0.0.1)");
- ``fmpm --hostname`` reaches the Fabric Manager at the address of ``FM_CMD_BIND_INTERFACE``
  (NVIDIA/Fabric-Manager-Client, README.md), so the service VM's management address is that one;
- the unit is ``nvidia-fabricmanager`` (the README above: ``systemctl start nvidia-fabricmanager``).

The service VM is planned as a tenant without GPUs or VFs (its vCPUs and memory placed and pinned by
the planner like any tenant's, so that no tenant takes them), its NVSwitches added to its domain as
PCI host devices after the plan."""

from __future__ import absolute_import, division, print_function

import ipaddress

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import pci_ids
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import group_members, is_bridge
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import check_tenant_list, tenant_record

__metaclass__ = type

FM_CONFIG = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
FM_SERVICE = "nvidia-fabricmanager"
# FABRIC_MODE 1: the Shared NVSwitch multitenancy mode; FM_CMD_BIND_INTERFACE: the management address
SHARED_NVSWITCH_MODE = "1"
REQUIRED = ("name", "vcpus", "memory_mb", "image", "address")
# what the service VM passes on to its tenant record as a tenant gives it
PASSED = ("hugepage_size", "firmware", "machine", "numa", "emulator", "autostart", "disks")
KEYS = REQUIRED + ("nvswitches", "management_mac", "hostname") + PASSED

# Sets KEY=VALUE pairs in the file $1 (the pairs follow it), each line of a key replaced, a key the
# file lacks appended; a missing file fails with what the image lacks. Run by the guest's cloud-init.
EDIT_SCRIPT = (
    'cfg=$1; shift\n'
    'if [ ! -f "$cfg" ]; then echo "$cfg is missing: the image needs the NVIDIA driver and nvidia-fabricmanager" >&2; exit 1; fi\n'
    'for pair in "$@"; do\n'
    '  key=${pair%%=*}\n'
    '  if grep -q "^$key=" "$cfg"; then sed -i "s|^$key=.*|$pair|" "$cfg"; else printf "%s\\n" "$pair" >> "$cfg"; fi\n'
    'done\n'
)


def fabric_settings(address):
    """The fabricmanager.cfg settings of the service VM whose management address is ``address``
    (IPv4, with or without its prefix): [(key, value)]."""
    return [("FABRIC_MODE", SHARED_NVSWITCH_MODE), ("FM_CMD_BIND_INTERFACE", str(ipaddress.ip_interface(u"%s" % address).ip))]


def fabric_runcmd(address, config=FM_CONFIG):
    """cloud-init ``runcmd`` entries (argument lists, run once at the first boot): the settings of
    :func:`fabric_settings` written into ``config``, then the unit enabled and (re)started."""
    pairs = ["%s=%s" % pair for pair in fabric_settings(address)]
    return [["sh", "-ec", EDIT_SCRIPT, "fabricmanager-config", config] + pairs,
            ["systemctl", "enable", FM_SERVICE],
            ["systemctl", "restart", FM_SERVICE]]


def host_nvswitches(topology):
    """The host model's NVSwitches (an NVIDIA function of PCI class 0x0680), sorted addresses."""
    return sorted(address for address, device in (topology.get("pci_devices") or {}).items() if pci_ids.is_nvswitch(device))


def _switches(wanted, topology):
    """The NVSwitches the service VM takes: ``wanted`` (addresses) checked, else all of the host's."""
    found = host_nvswitches(topology)
    if not found:
        raise InputError("fabric_vm: this host has no NVSwitch (an NVIDIA function of PCI class 0x0680) in its host model; "
                         "the service VM holds an HGX board's NVSwitches: leave fabric_vm out for this host (its host_vars)")
    if wanted is None:
        return found
    if not isinstance(wanted, (list, tuple)) or not wanted:
        raise InputError("fabric_vm.nvswitches: expected a non-empty list of PCI addresses (the host's NVSwitches: %s), "
                         "or leave it out for all of them" % ", ".join(found))
    out = []
    for index, text in enumerate(wanted):
        address = normalize_address(str(text))
        if address is None:
            raise InputError("fabric_vm.nvswitches[%d]: %r is not a PCI address (use the form 0000:07:00.0)" % (index, text))
        if address not in found:
            raise InputError("fabric_vm.nvswitches[%d]: %s is not an NVSwitch of this host (its NVSwitches: %s); name one of "
                             "them, or leave nvswitches out for all" % (index, address, ", ".join(found)))
        if address in out:
            raise InputError("fabric_vm.nvswitches[%d]: %s is listed twice; list each NVSwitch once" % (index, address))
        out.append(address)
    return out


def _isolated(switches, topology):
    """Each NVSwitch's IOMMU group holds only NVSwitches and bridges (a VFIO user gets the whole group)."""
    pci = topology.get("pci_devices") or {}
    for address in switches:
        if (pci.get(address) or {}).get("iommu_group") is None:
            raise InputError("fabric_vm: NVSwitch %s has no IOMMU group (the IOMMU is off): vfio-pci cannot take it; turn the "
                             "IOMMU on (the boot stage) before asking for the service VM" % address)
        others = [member for member in group_members(topology, address)
                  if member != address and not is_bridge(pci.get(member)) and not pci_ids.is_nvswitch(pci.get(member))]
        if others:
            raise InputError("fabric_vm: NVSwitch %s shares IOMMU group %s with %s, which is no NVSwitch; the service VM would get "
                             "the whole group: enable ACS on the PCIe ports above them, or leave fabric_vm out"
                             % (address, pci[address]["iommu_group"], ", ".join(others)))


def fabric_switches(value, topology):
    """The NVSwitches ``fabric_vm`` (None or {}: none -> []) gives its service VM, checked against the
    host model (an NVSwitch of the host, its IOMMU group only NVSwitches and bridges): what the
    SR-IOV/VFIO stage binds to vfio-pci for it. The rest of the option is the tenants stage's."""
    if not value:
        return []
    if not isinstance(value, dict):
        raise InputError("fabric_vm: expected a dict (%s), got %s" % (", ".join(REQUIRED), type(value).__name__))
    switches = _switches(value.get("nvswitches"), topology)
    _isolated(switches, topology)
    return switches


def fabric_vm(value, topology, tenants):
    """``fabric_vm`` (None or {}: no service VM -> None) checked against the host model and the
    tenant list (the inventory's, as given): -> {"name", "nvswitches" (addresses), "address" (the
    management address without its prefix: FM_CMD_BIND_INTERFACE), "tenant" (the service VM as a
    tenant without GPUs or VFs, for the tenant records and the planner)}. Bad input is an
    InputError naming the key and the fix."""
    if not value:
        return None
    if not isinstance(value, dict):
        raise InputError("fabric_vm: expected a dict (%s), got %s" % (", ".join(REQUIRED), type(value).__name__))
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise InputError("fabric_vm: unknown key(s) %s; it takes %s" % (", ".join(unknown), ", ".join(KEYS)))
    missing = [key for key in REQUIRED if value.get(key) in (None, "", {})]
    if missing:
        raise InputError("fabric_vm: %s required (name, vcpus and memory_mb its size, image its disk with the NVIDIA driver and "
                         "nvidia-fabricmanager, address its management address, the Fabric Manager's FM_CMD_BIND_INTERFACE)"
                         % ", ".join(missing))
    name = value["name"]
    if not isinstance(name, str):
        raise InputError("fabric_vm.name: expected a string (the service VM's libvirt domain name), got %r" % (name,))
    for index, tenant in enumerate(tenants or []):
        if isinstance(tenant, dict) and tenant.get("name") == name:
            raise InputError("fabric_vm.name: %s is also the name of tenants[%d]; a domain has one name: give the service VM "
                             "another name" % (name, index))
    switches = fabric_switches(value, topology)
    tenant = dict((key, value[key]) for key in PASSED if value.get(key) is not None)
    guest = {"address": value["address"]}
    for key in ("management_mac", "hostname"):
        if value.get(key):
            guest[key] = value[key]
    tenant.update(name=name, vcpus=value["vcpus"], memory_mb=value["memory_mb"], gpus=0, vfs=0, state="running",
                  image=value["image"], guest=guest)
    try:
        address = str(ipaddress.ip_interface(u"%s" % value["address"]).ip)
    except ValueError:
        raise InputError("fabric_vm.address: %r is not an IPv4 address with its prefix, like 10.20.0.5/24 (the service VM's "
                         "management address, where the Fabric Manager listens)" % (value["address"],))
    return {"name": name, "nvswitches": switches, "address": address, "tenant": tenant}


def with_fabric_vm(records, spec, firmware=None, held=None, host_address=None):
    """The tenant records with the service VM's (``spec``: :func:`fabric_vm`'s answer, or None:
    ``records`` as they are) after them, its fields checked as a tenant's are (messages name
    ``fabric_vm``), then the list's rules over all (a MAC and an address to one guest)."""
    if spec is None:
        return list(records)
    service = tenant_record(spec["tenant"], len(records), firmware, option="fabric_vm")
    return check_tenant_list(list(records) + [service], held, host_address)


def fabric_entries(entries, spec):
    """The tenants stage's domain entries with the service VM's completed (``spec``: :func:`fabric_vm`'s
    answer; None: ``entries`` as they are): its NVSwitches as PCI host devices and, where its entry has
    a seed, the Fabric Manager's settings in it. Its entry keeps no GPU or VF (the planner gave none)."""
    if spec is None:
        return entries
    out = []
    for entry in entries:
        if entry.get("name") == spec["name"] and entry.get("state") != "absent":
            entry = dict(entry, gpus=list(spec["nvswitches"]))
            if entry.get("cloud_init") is not None:
                entry["cloud_init"] = dict(entry["cloud_init"], fabric_manager_address=spec["address"])
        out.append(entry)
    return out


def fabric_existing(existing, spec):
    """The domains' assignments the planner keeps (``existing``: name -> what its definition holds)
    with the service VM's NVSwitches left out of its ``hostdevs``, so that a defined service VM keeps
    its CPUs as a tenant keeps its place (the planner keeps only GPUs and VFs it knows); any other
    device it holds stays, and the planner then places it anew."""
    if spec is None or spec["name"] not in existing:
        return existing
    out = dict(existing)
    held = dict(out[spec["name"]])
    held["hostdevs"] = [a for a in held.get("hostdevs") or [] if str(a).lower() not in spec["nvswitches"]]
    out[spec["name"]] = held
    return out
