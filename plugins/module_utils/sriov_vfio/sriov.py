# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SR-IOV virtual functions of a PF: count (always through 0), autoprobe, per-VF
settings through the PF's netdev, safety against removing VFs in use, persistence.

The kernel refuses a new non-zero ``sriov_numvfs`` while VFs exist (EBUSY): the count
goes to 0 first, which removes every VF, so that is refused while any VF is held by a
tenant (``/dev/vfio/N`` open, or a libvirt domain's hostdev) unless ``force``.
"""

from __future__ import absolute_import, division, print_function

import errno
import json

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import BootFiles, add_diffs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError, labelled
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.device_use import isolation, pci_function_of, usage_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import ZERO_MAC, check_mac, duplicates
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address, vf_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.tenant_request import vf_security
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vlan_id import check_vlan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.vf_lines import (
    check_ethernet_pf, not_shown, parse_ip_link_vfs, settings_differ)

__metaclass__ = type

LINK_STATES = ("auto", "enable", "disable")
# a PF's ``settings_not_read`` under a capture, as the boot stage says its firmware was not read
SETTINGS_NOT_READ = "not read: a capture holds no answer of ip (link show dev PF); every VF setting asked is shown as to be set"
VF_DEFAULTS = {"spoofchk": True, "trust": False}
SETTING_KEYS = ("mac", "vlan", "qos", "spoofchk", "trust", "link_state")


def normalize_vf_settings(entries, num_vfs, vf_addresses=None):
    """Validate the ``vfs`` option; returns {index: desired settings}. An entry names its
    VF by ``index`` or by PCI ``address`` (one of ``vf_addresses``, the VFs by index)."""
    desired = {}
    for position, entry in enumerate(entries or []):
        where = "vfs[%d]" % position
        index = entry.get("index")
        if entry.get("address") is not None:
            address = normalize_address(entry["address"])
            if index is not None:
                raise InputError("%s: give index or address, not both" % where)
            if address is None or address not in (vf_addresses or []):
                raise InputError("%s.address: %s is not one of the %d VFs of this PF (%s)"
                                 % (where, entry["address"], num_vfs or 0, ", ".join(a or "?" for a in vf_addresses or [])))
            index = vf_addresses.index(address)
        if index is None or index < 0:
            raise InputError("%s.index: give the VF index (0 .. num_vfs-1)" % where)
        if num_vfs is not None and index >= num_vfs:
            raise InputError("%s.index: VF %d does not exist with num_vfs %d (indexes run 0 .. %d)"
                             % (where, index, num_vfs, num_vfs - 1))
        if index in desired:
            raise InputError("%s.index: VF %d is listed twice" % (where, index))
        settings = dict(VF_DEFAULTS)
        for key in SETTING_KEYS:
            if entry.get(key) is not None:
                settings[key] = entry[key]
        if settings.get("mac") is not None:
            settings["mac"] = check_mac(settings["mac"], where + ".mac")
        if settings.get("vlan") is not None:
            settings["vlan"] = check_vlan(settings["vlan"], where + ".vlan", none_is_zero=True)
        if entry.get("clear"):
            if entry.get("mac") is not None or entry.get("vlan"):
                raise InputError("%s.clear: clears the VF's MAC and VLAN; leave mac and vlan out" % where)
            # what the kernel shows for a VF with no MAC and no VLAN set
            settings.update(mac=ZERO_MAC, vlan=0)
        if settings.get("qos") is not None:
            if not 0 <= settings["qos"] <= 7:
                raise InputError("%s.qos: %s is outside 0-7" % (where, settings["qos"]))
            if not settings.get("vlan"):
                raise InputError("%s.qos: a QoS priority needs a VLAN (set vlan)" % where)
        if settings.get("link_state") is not None and settings["link_state"] not in LINK_STATES:
            raise InputError("%s.link_state: use one of %s" % (where, ", ".join(LINK_STATES)))
        desired[index] = settings
    return desired


def check_macs_unique(pf, desired, current):
    """A MAC set here is one VF's: not two VFs of this request, nor a VF of the PF that keeps it
    (``current``: what ``ip`` shows now, for the VFs this request leaves alone)."""
    owners = [(settings.get("mac"), "vfs index %d" % index) for index, settings in sorted(desired.items())
              if settings.get("mac") != ZERO_MAC]
    for mac, whos in duplicates(owners):
        raise InputError("vfs: MAC %s is given to %s of PF %s; a MAC belongs to one VF: give each its own" % (mac, " and ".join(whos), pf))
    kept = dict((vf["mac"], index) for index, vf in current.items() if index not in desired and vf.get("mac") != ZERO_MAC)
    for index, settings in sorted(desired.items()):
        if settings.get("mac") in kept:
            raise InputError("vfs: MAC %s for VF %d is already the MAC of VF %d of PF %s; a MAC belongs to one VF: give another, "
                             "or change or clear VF %d's in the same call (clear: true)"
                             % (settings["mac"], index, kept[settings["mac"]], pf, kept[settings["mac"]]))


def ip_vf_argv(netdev, index, settings):
    argv = ["link", "set", "dev", netdev, "vf", str(index)]
    if settings.get("mac") is not None:
        argv += ["mac", settings["mac"]]
    if settings.get("vlan") is not None:
        argv += ["vlan", str(settings["vlan"])]
        if settings.get("qos"):
            argv += ["qos", str(settings["qos"])]
    for key in ("spoofchk", "trust"):
        if settings.get(key) is not None:
            argv += [key, "on" if settings[key] else "off"]
    if settings.get("link_state") is not None:
        argv += ["state", settings["link_state"]]
    return argv


class SriovManager:
    """The VFs of one PF on ``host``: sysfs read through ``host.fs`` and written through
    ``host.kernel``, VF settings through ``ip`` (``host.commands``; None when not installed)."""

    def __init__(self, host, topology):
        self.host = host
        self.fs = host.fs
        self.topology = topology
        self.pci = topology["pci_devices"]
        # a capture (root other than /, the preview) holds no answer of ip, and the controller's
        # ip would answer for the controller's network: the VFs' settings are then not read
        self.ip = host.commands.which("ip") if host.live else None

    def resolve_pf(self, text):
        address = pci_function_of(self.topology, text)
        if address is None:
            raise InputError("pf: %r is neither a PCI address (0000:81:00.0) nor the netdev of a PCI device" % text)
        dev = self.pci.get(address)
        if dev is None:
            raise InputError("pf: no PCI device %s on this host (see lspci -D)" % address)
        if dev["physfn"]:
            raise InputError("pf: %s is itself a VF of %s; give the PF" % (address, dev["physfn"]))
        if dev["sriov_totalvfs"] is None:
            raise InputError("pf: %s is not SR-IOV capable (no sriov_totalvfs); enable SR-IOV in the "
                             "firmware/BIOS (ConnectX: mlxconfig SRIOV_EN=1 NUM_OF_VFS=N) or pick another PF" % address)
        if not dev["sriov_totalvfs"]:
            raise InputError("pf: %s offers 0 VFs (sriov_totalvfs 0); raise NUM_OF_VFS in its firmware" % address)
        return address

    def vf_addresses(self, pf, count, topology=None):
        """Addresses of VFs 0..count-1: the existing ones (in ``topology``, default the one
        planned on), else from sriov_offset/stride."""
        existing = (topology or self.topology)["pci_devices"][pf]["virtfns"]
        if len(existing) == count:
            return list(existing)
        offset = self.fs.read_int("/sys/bus/pci/devices/%s/sriov_offset" % pf)
        stride = self.fs.read_int("/sys/bus/pci/devices/%s/sriov_stride" % pf)
        return [vf_address(pf, offset, stride, i) for i in range(count)]

    def current_settings(self, netdev):
        """The VFs' settings as ``ip link show dev NETDEV`` lists them, read once per call
        (:meth:`Host.read_once`): the gate's SR-IOV/VFIO and tenants checks read the same PFs.
        Every change of VFs or of their settings (``_write``, ``apply``) forgets the read.
        Under a capture nothing is read (:data:`SETTINGS_NOT_READ`): every setting asked is planned."""
        if not netdev or self.ip is None:
            return {}
        _rc, out, _err = self.host.read_once([self.ip, "link", "show", "dev", netdev])
        return parse_ip_link_vfs(out)

    def link_is_up(self, netdev):
        """The netdev's administrative state (IFF_UP in its ``flags``); None when unknown."""
        text = self.fs.read("/sys/class/net/%s/flags" % netdev) if netdev else None
        try:
            return bool(int(text, 16) & 0x1)
        except (TypeError, ValueError):
            return None

    def plan(self, pf_text, num_vfs=None, autoprobe=None, vfs=None, force=False, pf_link_up=True):
        pf = self.resolve_pf(pf_text)
        dev = self.pci[pf]
        total = dev["sriov_totalvfs"]
        if num_vfs is not None and not 0 <= num_vfs <= total:
            raise InputError("num_vfs: %d is outside 0-%d (sriov_totalvfs of %s); raise NUM_OF_VFS in the "
                             "firmware for more" % (num_vfs, total, pf))
        before = dev["sriov_numvfs"] or 0
        after = before if num_vfs is None else num_vfs
        desired = normalize_vf_settings(vfs, after, self.vf_addresses(pf, after))
        netdev = dev["netdevs"][0] if dev["netdevs"] else None
        if desired and not netdev:
            raise InputError("vfs: PF %s has no netdev, so VF MAC/VLAN/spoofchk/trust cannot be set "
                             "(they go through the PF's netdev: ip link set dev <pf> vf N ...); drop vfs "
                             "for this PF or load its network driver" % pf)
        if desired and self.ip is None and self.host.live:
            raise InputError("vfs: the ip command (iproute2) is missing; install iproute2")
        autoprobe_before = dev["sriov_drivers_autoprobe"]
        recreate = before != after
        in_use = {}
        if recreate and before:
            for vf in dev["virtfns"]:
                reasons = usage_of(self.fs, self.topology, vf)
                if reasons:
                    in_use[vf] = reasons
            if in_use and not force:
                raise StateError(
                    "changing the VF count of %s from %d to %d goes through 0 and removes every VF, but %s. "
                    "Nothing was changed. Stop the tenant using it (or release the device), or set force: true"
                    % (pf, before, after, "; ".join("VF %s: %s" % (vf, ", ".join(r)) for vf, r in sorted(in_use.items()))))
        current = {} if recreate else self.current_settings(netdev)
        check_ethernet_pf(pf, netdev, (self.topology.get("netdevs") or {}).get(netdev, {}).get("type"), desired, current)
        check_macs_unique(pf, desired, current)
        vf_changes = []
        for index, settings in sorted(desired.items()):
            have = current.get(index)
            keys = settings_differ(have, settings) if have is not None else sorted(settings)
            if keys:
                vf_changes.append({"index": index, "before": have, "after": settings, "keys": keys})
        # libvirt refuses to start a domain holding a VF as <interface type='hostdev'> while the
        # PF is down ("the PF is not online"), and nothing else may bring an unconfigured PF up.
        link_before = self.link_is_up(netdev)
        link_after = True if (pf_link_up and desired and link_before is not None) else link_before
        return {
            "pf": pf,
            "netdev": netdev,
            "link_up_before": link_before,
            "link_up_after": link_after,
            "pf_link_up": bool(pf_link_up),
            "sriov_totalvfs": total,
            "num_vfs_before": before,
            "num_vfs_after": after,
            "recreate": recreate,
            "autoprobe_before": autoprobe_before,
            "autoprobe_after": autoprobe_before if autoprobe is None else autoprobe,
            "vf_changes": vf_changes,
            "desired_settings": desired,
            "current_settings": current,
            "not_shown": not_shown(current, desired),
            "settings_not_read": SETTINGS_NOT_READ if netdev and not recreate and not self.host.live else None,
            "forced_in_use": in_use,
        }

    @staticmethod
    def changed(plan):
        return bool(plan["recreate"] or plan["autoprobe_before"] != plan["autoprobe_after"] or plan["vf_changes"]
                    or plan["link_up_before"] != plan["link_up_after"])

    def _write(self, run, host_path, value):
        self.host.forget_reads()
        try:
            self.host.kernel.write(host_path, value)
        except (OSError, IOError) as exc:
            name = errno.errorcode.get(exc.errno, str(exc.errno))
            hint = " (the kernel refuses a new count while VFs exist: it must go through 0)" if name == "EBUSY" else ""
            raise StateError("writing %s to %s failed: %s %s%s" % (value, host_path, name, exc.strerror, hint))
        run.changed = True

    def apply(self, plan, run):
        """Make the planned change; ``run.changed`` is set after each step."""
        base = "/sys/bus/pci/devices/%s" % plan["pf"]
        if plan["autoprobe_before"] != plan["autoprobe_after"]:
            self._write(run, base + "/sriov_drivers_autoprobe", "1" if plan["autoprobe_after"] else "0")
        if plan["recreate"]:
            if plan["num_vfs_before"]:
                self._write(run, base + "/sriov_numvfs", "0")
            if plan["num_vfs_after"]:
                self._write(run, base + "/sriov_numvfs", str(plan["num_vfs_after"]))
            if plan["desired_settings"]:
                # Fresh VFs: compare against what the driver gave them.
                current = self.current_settings(plan["netdev"])
                plan["vf_changes"] = [
                    {"index": i, "before": current.get(i), "after": s, "keys": settings_differ(current.get(i), s)}
                    for i, s in sorted(plan["desired_settings"].items())
                    if settings_differ(current.get(i), s)]
                plan["not_shown"] = not_shown(current, plan["desired_settings"])
        if plan["link_up_before"] != plan["link_up_after"]:
            self.host.forget_reads()
            self.host.commands.run([self.ip, "link", "set", "dev", plan["netdev"], "up"])
            run.changed = True
        for change in plan["vf_changes"]:
            self.host.forget_reads()
            self.host.commands.run([self.ip] + ip_vf_argv(plan["netdev"], change["index"], change["after"]))
            run.changed = True
        return plan

    def report_vfs(self, topology, plan, settings=None):
        """Per-VF facts after the change (predicted addresses in check mode)."""
        pci = topology["pci_devices"]
        pf = plan["pf"]
        vfs = self.vf_addresses(pf, plan["num_vfs_after"], topology)
        settings = settings or {}
        report = []
        for index, address in enumerate(vfs):
            dev = pci.get(address) or {}
            fresh = plan["recreate"] and not dev
            report.append({
                "index": index,
                "address": address,
                "numa_node": dev.get("numa_node", pci[pf]["numa_node"] if fresh else None),
                "iommu_group": dev.get("iommu_group"),
                "driver": dev.get("driver"),
                "netdev": (dev.get("netdevs") or [None])[0],
                "settings": settings.get(index) or plan["desired_settings"].get(index),
            })
        return report

    @staticmethod
    def persist_changes(plan, files):
        config = files.load_json(restore.SRIOV_CONFIG, {})
        pfs = dict(config.get("pfs") or {})
        entry = {"num_vfs": plan["num_vfs_after"], "autoprobe": plan["autoprobe_after"]}
        # Settings of VFs this run does not name are kept (a run may set only the count).
        kept = {vf["index"]: vf for vf in (pfs.get(plan["pf"]) or {}).get("vfs") or []
                if isinstance(vf, dict) and isinstance(vf.get("index"), int)}
        kept.update({i: dict(index=i, **s) for i, s in plan["desired_settings"].items()})
        kept = [vf for i, vf in sorted(kept.items()) if i < plan["num_vfs_after"]]
        if kept:
            entry["vfs"] = kept
        # A run that names VF settings decides whether the PF comes up at boot; a run that only
        # sets the count keeps what the last one decided (as it keeps the VF settings).
        link_up = plan["pf_link_up"] if plan["desired_settings"] else (pfs.get(plan["pf"]) or {}).get("link_up")
        if link_up:
            entry["link_up"] = True
        pfs[plan["pf"]] = entry
        text = json.dumps({"pfs": dict(sorted(pfs.items()))}, indent=2, sort_keys=True) + "\n"
        changes = files.change(restore.SRIOV_CONFIG, text)
        changes += files.service_changes(restore.SRIOV_UNIT, restore.SRIOV_UNIT_TEXT)
        return changes


# ---------------------------------------------------------------------------- the module
def state_texts(plan):
    """The PF's count, autoprobe and changed VF settings before and after, as diff texts."""
    def text(side, num_vfs, autoprobe, link_up):
        return json.dumps({"pf": plan["pf"], "num_vfs": num_vfs, "autoprobe": autoprobe, "link_up": link_up,
                           "vfs": dict((str(c["index"]), c[side]) for c in plan["vf_changes"])}, indent=2, sort_keys=True) + "\n"
    return (text("before", plan["num_vfs_before"], plan["autoprobe_before"], plan["link_up_before"]),
            text("after", plan["num_vfs_after"], plan["autoprobe_after"], plan["link_up_after"]))


def reload_units(host):
    """Make systemd read the changed unit (live machine only)."""
    systemctl = host.commands.which("systemctl") if host.live else None
    if systemctl:
        host.commands.run([systemctl, "daemon-reload"])


# The settings of one VF.
VF_SETTINGS = dict(
    mac=dict(type="str"),
    vlan=dict(type="int"),
    qos=dict(type="int"),
    spoofchk=dict(type="bool", default=True),
    trust=dict(type="bool", default=False),
    link_state=dict(type="str", choices=["auto", "enable", "disable"]),
    clear=dict(type="bool", default=False),
)

# What sriov_vfs takes for one PF: its top-level options, or each entry of ``pfs``.
PF_OPTIONS = dict(
    pf=dict(type="str"),
    num_vfs=dict(type="int"),
    autoprobe=dict(type="bool"),
    vfs=dict(type="list", elements="dict", default=[], options=dict(
        VF_SETTINGS, index=dict(type="int"), address=dict(type="str"),
    ), required_one_of=[("index", "address")], mutually_exclusive=[("index", "address")]),
    pf_link_up=dict(type="bool", default=True),
    persist=dict(type="bool", default=True),
    force=dict(type="bool", default=False),
)

# The module's argument spec (plugins/modules/sriov_vfs.py), here so that another module can run
# sriov_vfs inside its own call (runner.run_nested) with the same validation.
MODULE_ARGS = dict(
    argument_spec=dict(PF_OPTIONS, root=dict(type="path", default="/"), pfs=dict(type="list", elements="dict"),
                       vf_settings=dict(type="list", elements="dict", options=dict(
                           VF_SETTINGS, address=dict(type="str", required=True)))),
    required_one_of=[("pf", "pfs")],
    mutually_exclusive=[("pfs", option) for option in sorted(PF_OPTIONS)],
    required_by={"vf_settings": "pfs"},
)

_ONE_PF_ARGS = dict(argument_spec=dict(PF_OPTIONS, pf=dict(type="str", required=True)))


def sriov_vfs(params, host, run, topology=None):
    """The sriov_vfs module: one PF (``pf``) or each of ``pfs`` in list order, in one call.
    ``topology``: the host model as it is now, when the caller has read it (read otherwise);
    it is read again only after a PF's VFs changed."""
    if params.get("pfs") is None:
        return one_pf(params, host, run, topology)[0]
    entries, seen = [], {}
    for index, entry in enumerate(params["pfs"]):
        label = "pfs[%d]" % index
        options = nested_params(label, "gpuvirt.tenancy.sriov_vfs (one PF)", _ONE_PF_ARGS, entry)
        if options["pf"] in seen:
            raise InputError("%s: pf %s is also pfs[%d]; list each PF once" % (label, options["pf"], seen[options["pf"]]))
        seen[options["pf"]] = index
        entries.append((label, options))
    topology = topology or host.topology()
    skipped = assign_vf_settings(host, entries, params.get("vf_settings") or [], topology)
    settings_need_the_host(host, run, [(options["pf"], options["vfs"]) for _label, options in entries])
    check_macs_across_pfs(entries)
    results = []
    for label, options in entries:
        try:
            with labelled("%s (%s)" % (label, options["pf"])):
                result, vfs_changed = one_pf(options, host, run, topology)
        except (InputError, StateError) as exc:
            # what the PFs before this one did is part of the answer
            exc.details = dict(getattr(exc, "details", None) or {}, pfs=results)
            raise
        results.append(result)
        if vfs_changed:
            topology = None
    return {"changed": any(r["changed"] for r in results), "pfs": results, "vf_settings_skipped": skipped,
            "vfs_by_pf": dict((r["pf"], r.get("vfs") or []) for r in results)}


def settings_need_the_host(host, run, pfs):
    """VF settings (and the PF link they bring up) go through ip, which a capture cannot answer:
    under one (root other than /) they are refused outside check mode, before any change."""
    asked = [pf for pf, vfs in pfs if vfs]
    if asked and not host.live and not run.check_mode:
        raise StateError("VF settings of %s go through ip on the running host, and root %s is a captured tree: preview them "
                         "in check mode, or set them on the host (root /). Nothing was changed" % (", ".join(asked), host.root))


def check_macs_across_pfs(entries):
    """A MAC given to VFs of two PFs of one call is refused, before any PF changes."""
    owners = []
    for label, options in entries:
        for vf in options["vfs"] or []:
            if vf.get("mac") is not None:
                owners.append((str(vf["mac"]).lower(), "%s (%s) VF %s" % (label, options["pf"], vf.get("address") or vf.get("index"))))
    for mac, whos in duplicates(owners):
        if len(set(who.split(" VF ")[0] for who in whos)) > 1:
            raise InputError("pfs: MAC %s is given to %s; a MAC belongs to one VF: give each its own" % (mac, " and ".join(whos)))


def assign_vf_settings(host, entries, vf_settings, topology):
    """Hand each of ``vf_settings`` (VFs named by address) to the entry of ``pfs`` whose PF owns
    that VF once its count is set (the VFs it has, or the addresses its routing offset/stride
    gives them), before anything changes. -> the settings not applied, each with its reason:
    a VF of no PF listed, or of a PF without a netdev (settings go through the PF's netdev)."""
    manager = SriovManager(host, topology)
    owners = {}
    for label, options in entries:
        with labelled("%s (%s)" % (label, options["pf"])):
            pf = manager.resolve_pf(options["pf"])
        dev = manager.pci[pf]
        count = options["num_vfs"] if options["num_vfs"] is not None else (dev["sriov_numvfs"] or 0)
        for address in manager.vf_addresses(pf, count):
            owners[address] = (options, pf, dev["netdevs"])
    skipped = []
    for index, setting in enumerate(vf_settings):
        address = normalize_address(setting["address"])
        if address is None:
            raise InputError("vf_settings[%d]: %r is not a PCI address (use the form 0000:41:00.2)" % (index, setting["address"]))
        owner = owners.get(address)
        if owner is None:
            skipped.append({"address": address, "reason": "not a VF of the PFs in pfs (with their VF counts)"})
        elif not owner[2]:
            skipped.append({"address": address, "reason": "PF %s has no netdev: VF MAC/VLAN go through it" % owner[1]})
        else:
            owner[0]["vfs"] = list(owner[0]["vfs"]) + [dict(setting, address=address, index=None)]
    return skipped


def one_pf(params, host, run, topology=None):
    """One PF: decide, then act unless in check mode. -> (the module's result, whether the
    VFs changed: the host model read before is then out of date)."""
    settings_need_the_host(host, run, [(params["pf"], params["vfs"])])
    topology = topology or host.topology()
    manager = SriovManager(host, topology)
    plan = manager.plan(params["pf"], num_vfs=params["num_vfs"], autoprobe=params["autoprobe"],
                        vfs=params["vfs"], force=params["force"], pf_link_up=params["pf_link_up"])
    changed = manager.changed(plan)
    files = BootFiles(host)
    changes = manager.persist_changes(plan, files) if params["persist"] else []
    enable = params["persist"] and files.wants_link_missing(restore.SRIOV_UNIT)
    before_text, after_text = state_texts(plan)
    if not run.check_mode:
        if changed:
            manager.apply(plan, run)
        if changes or enable:
            files.apply(changes, enable_unit=restore.SRIOV_UNIT)
            run.changed = True
            reload_units(host)
        if changed:
            topology = host.topology(fresh=True)
    settings = None
    if not run.check_mode and plan["desired_settings"]:
        # what ip showed while deciding is still true when nothing was applied
        settings = manager.current_settings(plan["netdev"]) if changed or plan["recreate"] else plan["current_settings"]
    vfs = manager.report_vfs(topology, plan, settings)
    if plan["recreate"] and run.check_mode:
        iso = {"viable": None, "groups": {}, "reasons": ["known once the VFs exist (check mode)"]}
    else:
        iso = isolation(topology, [vf["address"] for vf in vfs])
    if iso["viable"] is False and vfs:
        run.warn("VFs of %s are not viable for multi-tenant use: %s" % (plan["pf"], "; ".join(iso["reasons"])))
    weak = [("vfs", "%d of PF %s" % (index, plan["pf"]), settings) for index, settings in sorted(plan["desired_settings"].items())]
    for warning in vf_security(weak, {}, set()):
        run.warn(warning)
    unshown = {}
    for index, keys in sorted(plan["not_shown"].items()):
        unshown.setdefault(", ".join(keys), []).append(str(index))
    for keys, indexes in sorted(unshown.items()):
        run.warn("PF %s: ip link show does not show %s of VF %s (an older driver or iproute2): not compared with the "
                 "wanted value, nor known to hold" % (plan["pf"], keys, ", ".join(indexes)))
    if plan["forced_in_use"]:
        run.warn("force: removed VFs in use: %s" % ", ".join(sorted(plan["forced_in_use"])))
    run.diff.add("PF %s" % plan["pf"], before_text, after_text)
    add_diffs(run.diff, changes)
    return {
        "changed": changed or bool(changes) or bool(enable),
        "pf": plan["pf"],
        "netdev": plan["netdev"],
        "sriov_totalvfs": plan["sriov_totalvfs"],
        "num_vfs": plan["num_vfs_after"],
        "num_vfs_before": plan["num_vfs_before"],
        "recreated": plan["recreate"],
        "autoprobe": plan["autoprobe_after"],
        "pf_link_up": plan["link_up_after"],
        "vfs": vfs,
        "isolation": iso,
        "settings_not_read": plan["settings_not_read"],
        "persisted_files": [path for path, _b, _a in changes],
    }, changed and not run.check_mode
