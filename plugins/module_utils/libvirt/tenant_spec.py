# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's ``tenant_domain`` options, checked (``TenantSpec``): its size, QoS, devices,
network VFs and their MACs and VLANs, disks, firmware and machine. Building or updating the
definition from them is ``DomainBuilder``'s (domain_builder)."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_builder import DomainBuilder
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_cells import check_cells
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_switch import check_switch_cells, check_switches
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_name import check_domain_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import IOTUNE_KEYS, address_attributes
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import SIZES_KB, size_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import (
    check_arch, check_domain_type, check_firmware, check_machine, check_size, check_tenant_vlan, whole)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import tenant_vf_macs

__metaclass__ = type

# a vcpu_quota at or above this (cgroup v2 "max") or below 1 is no cap
UNLIMITED_QUOTA = 17592186044415


def virtio_disk_target(index):
    """The guest device name of the index-th virtio disk, as the kernel names them: vda .. vdz,
    vdaa .. vdaz, vdba, ... (bijective base 26, no limit)."""
    letters = ""
    number = index + 1
    while number:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return "vd" + letters


class TenantSpec(DomainBuilder):
    """The ``tenant_domain`` options, validated; builds a new definition or brings one to them."""

    def __init__(self, params, limits=None, planned=False):
        """``limits``: what the host has (tenant_request.limits_of_*), which bounds the size.
        ``planned``: ``params`` is an entry the tenants stage made (tenant_plan.tenant_domains)
        from the tenant records the planner placed: its name, size, hugepage size, devices,
        network VFs, MAC, VLAN, firmware, machine and domain type are taken as they are
        (checked once: the tenant's in its record, the stage's settings in tenant_stage), not
        checked again; what the entry passes on as the user gave it (QoS, disks) is checked here."""
        self.name = params["name"] if planned else check_domain_name(params["name"], "name")
        self.domain_type = (params.get("domain_type") if planned else check_domain_type(params.get("domain_type"))) or "kvm"
        if planned:
            self.vcpus, self.max_vcpus, memory_mb = params["vcpus"], params["max_vcpus"], params["memory_mb"]
        else:
            self.vcpus, self.max_vcpus, memory_mb = check_size(params.get("vcpus"), params.get("memory_mb"),
                                                               params.get("max_vcpus"), limits)
        self.qos = self._qos(params.get("qos"))
        self.memory_kib = memory_mb * 1024
        self.hugepage_kib = None
        # a planned entry's size is the planner's size name, or none
        size = (params.get("hugepage_size") if params.get("hugepage_size") in SIZES_KB else None) if planned else \
            size_name(params.get("hugepage_size"), "hugepage_size", allow_none=True)
        if size:
            self.hugepage_kib = SIZES_KB[size]
            # guest memory is whole hugepages
            self.memory_kib = -(-self.memory_kib // self.hugepage_kib) * self.hugepage_kib
        if planned:
            # the host model's addresses, each once (the planner's)
            self.gpus, self.vfs = list(params.get("gpus") or []), list(params.get("vfs") or [])
        else:
            self.gpus = [self._addr(a, "gpus") for a in params.get("gpus") or []]
            self.vfs = [self._addr(a, "vfs") for a in params.get("vfs") or []]
            all_devices = self.gpus + self.vfs
            if len(set(all_devices)) != len(all_devices):
                raise InputError("gpus/vfs: a PCI address is listed twice")
        self.mac = params.get("mac") if planned else self._mac(params.get("mac"), "mac")
        self.vlan = params.get("vlan") if planned else check_tenant_vlan(params.get("vlan"), "vlan")
        self.interfaces = self._interfaces(params.get("network_vfs") or [], planned)
        self.network_vfs = list(self.interfaces)
        self.firmware = params["firmware"] if planned else check_firmware(params.get("firmware"))
        # the OVMF 64-bit aperture in MiB; None: no fw_cfg entry (OVMF's default window)
        self.mmio_window_mb = params.get("mmio_window_mb") or None
        # False on a libvirt driver that drops <qemu:commandline> (the test driver of a preview):
        # an existing definition is then not brought to the window it can never keep.
        self.qemu_args_kept = True
        # whether the host's libvirt takes <maxphysaddr> (captured_programs.maxphysaddr_supported;
        # None: unknown, written as before); phys_bits: what the last build or update did with it
        self.maxphysaddr = None
        self.phys_bits = None
        self.notes = []
        self.disks = []
        targets = set()
        for index, disk in enumerate(params.get("disks") or []):
            path = disk.get("path")
            if not path:
                raise InputError("disks[%d]: path is required" % index)
            target = disk.get("target") or virtio_disk_target(len(self.disks))
            if target in targets:
                raise InputError("disks[%d]: target %s used twice" % (index, target))
            targets.add(target)
            self.disks.append({"path": path, "format": disk.get("format") or "qcow2", "target": target})
        self.machine = (params.get("machine") or None) if planned else check_machine(params.get("machine"))
        # guest NUMA cells (domain_cells): one per host node of a spanning tenant, one for a tenant on one
        # node with GPUs or VFs (as the tenants stage gives them), [] for none; each cell's memory bound as
        # the domain's memory is (memory_mode, checked with the pins: domain_pinning)
        self.memory_mode = params.get("memory_mode") or "strict"
        self.cells = check_cells(params.get("numa_cells"), self.max_vcpus, self.memory_kib, self.gpus + self.vfs, self.machine)
        # the devices the host has under one PCIe switch, under one emulated switch (domain_switch)
        self.switches = check_switches(params.get("pcie_switches"), self.gpus + self.vfs, self.machine)
        check_switch_cells(self.switches, self.cells)
        self.arch = (params.get("arch") if planned else check_arch(params.get("arch"))) or "x86_64"
        # set by tenant_domain from the guest options (guest_image): the cloud-init seed ISO, the
        # management NIC ({network or bridge, mac}) and the serial console's log file
        self.seed_cdrom = None
        self.management = None
        self.data_nic = None
        self.console_log = None

    @classmethod
    def named(cls, name):
        """A spec that names a domain and nothing else (to remove it)."""
        spec = cls.__new__(cls)
        spec.name = name
        return spec

    @staticmethod
    def _qos(qos):
        """``qos`` -> {cpu_shares, cpu_period, cpu_quota: int|None, iotune: {key: int}} or None (not managed)."""
        if qos is None:
            return None
        if not isinstance(qos, dict):
            raise InputError("qos: expected a dict with cpu_shares, cpu_period, cpu_quota and iotune")
        unknown = sorted(set(qos) - set(["cpu_shares", "cpu_period", "cpu_quota", "iotune"]))
        if unknown:
            raise InputError("qos: unknown key(s) %s; known: cpu_shares, cpu_period, cpu_quota, iotune" % ", ".join(unknown))
        out = {"iotune": {}}
        limits = {"cpu_shares": (2, 262144), "cpu_period": (1000, 1000000), "cpu_quota": (1000, UNLIMITED_QUOTA - 1)}
        for key, (low, high) in limits.items():
            value = qos.get(key)
            if value is not None:
                value = whole(value, "qos.%s" % key)
                if not low <= value <= high:
                    raise InputError("qos.%s: %d is outside %d-%d (libvirt cputune)" % (key, value, low, high))
            out[key] = value
        if out["cpu_quota"] is not None and out["cpu_period"] is None:
            raise InputError("qos.cpu_quota: a quota needs its period; set qos.cpu_period (microseconds, e.g. 100000)")
        iotune = qos.get("iotune") or {}
        if not isinstance(iotune, dict):
            raise InputError("qos.iotune: expected a dict of %s" % ", ".join(IOTUNE_KEYS))
        bad = sorted(set(iotune) - set(IOTUNE_KEYS))
        if bad:
            raise InputError("qos.iotune: unknown key(s) %s; known: %s" % (", ".join(bad), ", ".join(IOTUNE_KEYS)))
        for key, value in iotune.items():
            if value is None:
                continue
            value = whole(value, "qos.iotune.%s" % key)
            if value < 0:
                raise InputError("qos.iotune.%s: %d is negative; 0 (or leaving it out) means no limit" % (key, value))
            if value:
                out["iotune"][key] = value
        for prefix in ("bytes", "iops"):
            if out["iotune"].get("total_%s_sec" % prefix) and (out["iotune"].get("read_%s_sec" % prefix)
                                                               or out["iotune"].get("write_%s_sec" % prefix)):
                raise InputError("qos.iotune: total_%s_sec cannot be set with read_%s_sec/write_%s_sec (libvirt refuses both); "
                                 "keep one" % (prefix, prefix, prefix))
        return out

    @staticmethod
    def _addr(addr, what):
        address_attributes(addr, what)
        return str(addr).lower()

    @staticmethod
    def _mac(mac, what):
        return check_mac(mac, what) if mac else None

    def _interfaces(self, entries, planned=False):
        """VF address -> {mac, vlan} of the network VFs: an entry's own MAC and VLAN, else the
        tenant's ``vlan`` and its ``mac`` for the first one, and a MAC derived from the tenant
        name and the VF's index for each other (vf_mac). ``planned``: the plan's entries (the
        host model's addresses, the records' MACs and VLANs), taken as they are."""
        if planned:
            own = dict((entry["address"], entry) if isinstance(entry, dict) else (entry, {}) for entry in entries)
            derived = tenant_vf_macs(self.name, self.vfs, mac=self.mac, network=set(own))
            return dict((addr, {"mac": own[addr].get("mac") or derived[addr], "vlan": own[addr].get("vlan", self.vlan)})
                        for addr in self.vfs if addr in own)
        own = {}
        for index, entry in enumerate(entries):
            what = "network_vfs[%d]" % index
            if isinstance(entry, dict):
                addr = self._addr(entry.get("address"), what + ".address")
                own[addr] = {"mac": self._mac(entry.get("mac"), what + ".mac"),
                             "vlan": check_tenant_vlan(entry["vlan"], what + ".vlan") if entry.get("vlan") is not None else self.vlan}
            else:
                own[self._addr(entry, what)] = {"mac": None, "vlan": self.vlan}
        stray = [a for a in own if a not in self.vfs]
        if stray:
            raise InputError("network_vfs: %s not listed in vfs" % ", ".join(stray))
        derived = tenant_vf_macs(self.name, self.vfs, mac=self.mac, network=set(own))
        out = {}
        for addr in [a for a in self.vfs if a in own]:
            out[addr] = {"mac": own[addr]["mac"] or derived[addr], "vlan": own[addr]["vlan"]}
        macs = [i["mac"] for i in out.values()]
        if len(set(macs)) != len(macs):
            raise InputError("network_vfs: two VFs would share MAC %s; give each its own"
                             % sorted(m for m in macs if macs.count(m) > 1)[0])
        return out
