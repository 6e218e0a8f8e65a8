# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants' guests on the controller: ``guest_hosts`` (the running guests as
``add_host`` entries, with an SSH jump through their GPU host), ``guest_names`` (their inventory
names), ``guest_wait_times`` (how long each guest's SSH server was waited for),
``guest_wait_failures`` (the guests that did not answer SSH, named with their console logs) and
``guest_report_lines`` (one line per tenant for the main command's report). Pure functions of
their inputs."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError


__metaclass__ = type

# The collection's code is imported inside each filter, when it is called: ansible-core loads every
# filter file of the collection in each worker that looks up any of its filters.

GUEST_GROUP = "gpuvirt_guests"


def _dict(value, what, name):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.%s: %s must be a dict, got %s" % (name, what, type(value).__name__))
    return value


def _tenants(tenants, name):
    if not isinstance(tenants, list):
        raise AnsibleFilterError("gpuvirt.tenancy.%s: expected the tenant list (gpuvirt_tenants), got %s"
                                 % (name, type(tenants).__name__))
    return dict((t.get("name"), t) for t in tenants if isinstance(t, dict))


def _address(value):
    return str(value).split("/", 1)[0] if value else None


def guest_hosts(tenants, access=None, host=None, plan=None, known=None, add=True, links=None):
    """The ``add_host`` entries of the running tenants that have a guest (``image``) and a
    management address: inventory name (the tenant's), group gpuvirt_guests, ``ansible_host`` (the
    address without its prefix), ``ansible_user`` and ``ansible_port`` (the access's), with ``jump`` (default
    true: the management network is behind the GPU host) an ``ansible_ssh_common_args`` with
    ``ProxyJump`` through the GPU host (``host``: {name, address, user, port}), the GPU host's
    name, the console log, and the MAC of the tenant's RDMA NIC: its first VF (from ``plan``, the
    tenants stage's plan, or the tenant's ``mac``), else its ``data_nic``, by which the guest stage
    finds the NIC; with ``links`` (the tenants stage's ``pci_links``), a tenant's host link facts for its
    NCCL topology file. Tenants ``known``
    to the inventory already (a static guest inventory) are left to it. ``add`` false: none
    (the inventory lists the guests itself)."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo import NO_GPU  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import console_log_path  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_inputs import data_nic_mac  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import tenant_vf_macs  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import guest_inventory as check  # pylint: disable=import-outside-toplevel
    name = "guest_hosts"
    if not check.flag(add, "add (tenant_guests_add_hosts)", True):
        return []
    access = _dict(access, "the guest access (gpuvirt_guest_access)", name)
    host = _dict(host, "host", name)
    placements = _dict(_dict(plan, "plan", name).get("placements"), "plan.placements", name)
    links_given = links is not None
    links = _dict(links, "links (the tenants stage's pci_links)", name)
    # Every input is checked before the first entry (plugin_utils/guest_inventory.py: the tenant's name as an
    # inventory host name, ports 1-65535, strict booleans, the jump as ssh takes it): a bad one is an
    # AnsibleFilterError naming it and the fix, and no host is added.
    port = check.tcp_port(access.get("port"), "access.port (gpuvirt_guest_access.port, the guests' SSH port)")
    jump = check.proxy_jump(host) if check.flag(access.get("jump"), "access.jump (gpuvirt_guest_access.jump)", True) and host else None
    out = []
    for tenant_name, tenant in _tenants(tenants, name).items():
        guest = _dict(tenant.get("guest"), "tenant %s: guest" % tenant_name, name)
        if tenant.get("state") != "running" or not tenant.get("image") or not guest.get("address"):
            continue
        if tenant_name in (known or []):
            # listed by the inventory: reached as it says, unless its name is the controller's or a group's
            check.reserved_name(tenant_name, GUEST_GROUP)
            continue
        check.inventory_name(tenant_name, GUEST_GROUP)
        entry = {"name": tenant_name, "groups": [GUEST_GROUP], "ansible_host": _address(guest["address"]),
                 "gpuvirt_tenant_host": host.get("name"), "gpuvirt_guest_console_log": console_log_path(tenant_name)}
        if access.get("user"):
            entry["ansible_user"] = access["user"]
        if port is not None:
            entry["ansible_port"] = port
        if jump:
            entry["ansible_ssh_common_args"] = "-o ProxyJump=%s -o StrictHostKeyChecking=accept-new" % jump
        placement = placements.get(tenant_name) or {}
        vfs = placement.get("vfs") or []
        mac = tenant_vf_macs(tenant_name, vfs, mac=placement.get("mac") or tenant.get("mac")) if vfs else {}
        first = sorted(mac.items())[0][1] if mac else (str(tenant["mac"]).lower() if tenant.get("mac") else None)
        if first is None and isinstance(tenant.get("data_nic"), dict):
            # a tenant without a VF: its data NIC is its RDMA NIC
            first = str(tenant["data_nic"].get("mac") or data_nic_mac(tenant_name)).lower()
        if first:
            entry["gpuvirt_guest_vf_mac"] = first
        if vfs:
            # the guest stage's NCCL settings for a VM (guest_rdma): GPUDirect RDMA as far as the tenant's GPUs and
            # VFs lie apart on the host (the plan's level, as NCCL names it), relaxed ordering on
            level = check.GDR_LEVEL_OF.get(placement.get("pcie_affinity")) if placement.get("gpus") else None
            if level:
                entry["gpuvirt_guest_gdr_level"] = level
            if isinstance(links.get(tenant_name), dict):
                # the host's link facts of its GPUs and VFs: the guest's NCCL topology file (guest_rdma, nccl_env topo_links)
                entry["gpuvirt_guest_pci_links"] = links[tenant_name]
            elif links_given and not placement.get("gpus"):
                # no GPU (any more): no file, and the one the guest stage wrote earlier goes with its NCCL_TOPO_FILE
                entry["gpuvirt_guest_pci_links"] = {"missing": NO_GPU}
            entry["gpuvirt_guest_relaxed_ordering"] = "1"
        out.append(entry)
    return out


def guest_names(entries):
    """The inventory names of guest_hosts ``entries``, in their order."""
    if not isinstance(entries, list):
        raise AnsibleFilterError("gpuvirt.tenancy.guest_names: expected the guest_hosts entries (a list), got %s" % type(entries).__name__)
    names = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("name"):
            raise AnsibleFilterError("gpuvirt.tenancy.guest_names: each guest_hosts entry has a name, got %r" % (entry,))
        names.append(entry["name"])
    return names


def guest_wait_times(results):
    """``[[name, seconds]]``: each guest of a looped ``wait_for`` over guest_hosts entries (its
    ``results``, each with its ``item``) and the seconds it was waited for (``?`` where the
    result has none)."""
    if not isinstance(results, list):
        raise AnsibleFilterError("gpuvirt.tenancy.guest_wait_times: expected the results of the looped wait, got %s"
                                 % type(results).__name__)
    times = []
    for result in results:
        item = result.get("item") if isinstance(result, dict) else None
        if not isinstance(item, dict) or not item.get("name"):
            raise AnsibleFilterError("gpuvirt.tenancy.guest_wait_times: each result is a wait over a guest_hosts entry (its item "
                                     "with a name), got %r" % (result,))
        times.append([item["name"], result.get("elapsed", "?")])
    return times


def guest_wait_failures(results, host_name=None):
    """The guests that did not answer SSH: one message each, naming the tenant, its address, how
    long it was waited for and its console log on the GPU host. ``results``: the ``results`` of
    a looped ``wait_for`` over guest_hosts entries (each with its ``item``)."""
    if not isinstance(results, list):
        raise AnsibleFilterError("gpuvirt.tenancy.guest_wait_failures: expected the results of the looped wait, got %s"
                                 % type(results).__name__)
    out = []
    for result in results:
        # a wait run with failed_when false keeps no failed flag: an answer has its port
        if not isinstance(result, dict) or result.get("skipped") or (not result.get("failed") and result.get("port")):
            continue
        item = result.get("item") or {}
        out.append("tenant %s did not answer SSH on %s:%s within %ss (%s); read its console log %s on %s"
                   % (item.get("name"), item.get("ansible_host"), item.get("ansible_port", 22), result.get("elapsed", "?"),
                      (result.get("msg") or "no answer").strip(), item.get("gpuvirt_guest_console_log"),
                      host_name or item.get("gpuvirt_tenant_host") or "its GPU host"))
    return out


def _exchange_words(exchanges, same):
    peers = [e for e in exchanges if bool(e.get("same_vlan")) == same]
    if not peers:
        return "not checked"
    words = []
    for exchange in peers:
        ok = exchange.get("ok")
        if ok is None:
            state = "not checked"
        elif same:
            state = "ok" if ok else "FAILED"
        else:
            state = "NOT BLOCKED" if ok else "blocked"
        words.append("%s %s" % (exchange.get("peer"), state))
    return ", ".join(words)


def _host_vf_words(host_vfs):
    """The tenant's VFs as the GPU host reads them (``ip link`` of the PF): MAC, VLAN, spoof check, trust."""
    words = []
    for vf in host_vfs:
        if not isinstance(vf, dict):
            continue
        spoof, trust = vf.get("spoofchk"), vf.get("trust")
        words.append("VF %s MAC %s VLAN %s spoof check %s trust %s" % (
            vf.get("address") or "?", vf.get("mac") or "unset", vf.get("vlan") or "none",
            "unknown" if spoof is None else ("on" if spoof else "OFF"), "unknown" if trust is None else ("ON" if trust else "off")))
    return "host sets " + ", ".join(words) if words else ""


def guest_report_lines(rows):
    """One report line per tenant: whether its guest answers over SSH (with its kernel), its VF
    (netdev, MAC), its RDMA device and GID index, and the RDMA exchange with the tenants of its
    VLAN (ok / FAILED) and across VLANs (blocked / NOT BLOCKED); with ``host_vfs``, its VFs as the
    GPU host set them. ``rows``: [{name, guest, ssh, kernel, console_log, vf: {netdev, mac},
    rdma_device, gid_index, vlan, exchanges: [{peer, same_vlan, ok}], host_vfs: [{address, mac,
    vlan, spoofchk, trust}]}]; ``guest`` false: a domain without a guest OS the collection made
    (no image); ``ssh`` false: the guest did not answer, unset: not asked; what a row lacks reads
    "not checked"."""
    if not isinstance(rows, list):
        raise AnsibleFilterError("gpuvirt.tenancy.guest_report_lines: expected a list of tenant rows, got %s" % type(rows).__name__)
    lines = []
    for row in rows:
        if not isinstance(row, dict) or not row.get("name"):
            raise AnsibleFilterError("gpuvirt.tenancy.guest_report_lines: each row needs a name, got %r" % (row,))
        host = _host_vf_words(row.get("host_vfs") or [])
        if row.get("guest") is False:
            parts = ["no guest OS (a domain without an image): SSH, kernel, RDMA device, GID index and exchanges not checked"]
        elif row.get("ssh") is None:
            parts = ["guest not checked over SSH"]
        elif not row.get("ssh"):
            where = " (console log %s)" % row["console_log"] if row.get("console_log") else ""
            parts = ["guest does NOT answer over SSH%s" % where]
        else:
            vf = row.get("vf") or {}
            exchanges = [e for e in row.get("exchanges") or [] if isinstance(e, dict)]
            vlan = " %s" % row["vlan"] if row.get("vlan") is not None else ""
            parts = ["guest answers over SSH (kernel %s)" % (row.get("kernel") or "unknown"),
                     "VF %s %s" % (vf.get("netdev") or "not found", vf.get("mac") or "") if vf else "VF not found",
                     "RDMA %s GID index %s" % (row.get("rdma_device") or "none", row["gid_index"] if row.get("gid_index") is not None
                                               else "unknown"),
                     "RDMA within VLAN%s: %s" % (vlan, _exchange_words(exchanges, True)),
                     "across VLANs: %s" % _exchange_words(exchanges, False)]
        if host:
            parts.append(host)
        lines.append("%s: %s" % (row["name"], "; ".join(p.strip() for p in parts)))
    return lines


def netdev_by_mac(facts, mac):
    """The netdev whose MAC is ``mac`` in gathered facts (the ``network`` subset: ``interfaces``
    and each ``<name>.macaddress``); a VLAN on the VF shares its MAC, so a name with a dot comes
    last. An error naming the MACs there when none carries it."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.netdev_by_mac: expected ansible_facts (gathered with the network subset)")
    want = str(mac or "").lower()
    seen = {}
    for name in facts.get("interfaces") or []:
        entry = facts.get(name) or {}
        seen[name] = str(entry.get("macaddress") or "").lower()
    found = sorted((n for n, m in seen.items() if m == want), key=lambda n: ("." in n, n))
    if not found:
        raise AnsibleFilterError("gpuvirt.tenancy.netdev_by_mac: no netdev carries %s (%s); is the VF passed through and its "
                                 "driver loaded?" % (want, ", ".join("%s %s" % i for i in sorted(seen.items())) or "no netdevs"))
    return found[0]


class FilterModule:
    """Guest filters."""

    def filters(self):
        return {"guest_hosts": guest_hosts, "guest_names": guest_names, "guest_wait_times": guest_wait_times,
                "guest_wait_failures": guest_wait_failures, "guest_report_lines": guest_report_lines,
                "netdev_by_mac": netdev_by_mac}
