# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants' guests in the controller's inventory, for the action ``gpuvirt.tenancy.guest_inventory``
(role tenant_guests): :func:`guest_hosts` (the running guests as ``add_host`` entries, with an SSH
jump through their GPU host), :func:`wait_times` (how long each guest's SSH server was waited
for) and :func:`wait_failures` (the guests that did not answer SSH, named with their console logs);
and the checks of what ``guest_hosts`` writes into the
inventory: a tenant's name as an inventory host name, the guests' and the jump host's SSH ports,
the access's booleans, and the jump host as ``ssh -o ProxyJump`` takes it. The tenants are the
tenant records (``tenancy/record.py``'s ``tenant_records``: each tenant's fields are checked there
once, the guest's address, state, image, MACs and data NIC among them). Pure: each function
returns the value to use or raises a :class:`GuestInventoryError` whose message names the input and
the fix."""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.parsing.utils.addresses import parse_address

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo import NO_GPU
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import console_log_path
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.guest_inputs import data_nic_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_addresses, tenant_records
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import tenant_vf_macs

__metaclass__ = type

# The plan's GPU-to-VF level (nvidia-smi's names) as NCCL_NET_GDR_LEVEL names it: NCCL's PHB covers both
# nvidia-smi's PHB and NODE (through host bridges of one CPU), its SYS crosses CPUs (guest_hosts writes
# it into a guest's facts; the tenants stage's preview report shows it).
GDR_LEVEL_OF = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}


GUEST_GROUP = "gpuvirt_guests"


class GuestInventoryError(ValueError):
    """An input guest_hosts cannot write into the inventory: its message names the input and the
    fix, and says that no host was added."""

    def __init__(self, message):
        super(GuestInventoryError, self).__init__("%s; no host was added" % message)


class GuestWaitError(ValueError):
    """A wait's result that is not one of a looped wait over guest_hosts entries: its message names it."""


# Groups every inventory has (ansible-core's InventoryData): a host by such a name is never the one a play means.
IMPLICIT_GROUPS = ("all", "ungrouped")
# A user name in ``user@host``: no blank (ansible_ssh_common_args is split on blanks), no ',' (ProxyJump's list
# separator), no ':' or brackets (the host's port and IPv6 brackets), no quote; not starting with '-'.
USER_NAME = re.compile(r"^[A-Za-z0-9._$][A-Za-z0-9._@$-]*$")


def _host_name(text):
    """Whether ``text`` is one host as Ansible's inventory reads it: a host name, an IPv4 or an
    IPv6 address, without a port or a range (ansible-core's ``parse_address``, which
    ``add_host`` splits a name with: ``tenant:22`` would be host ``tenant`` on port 22)."""
    try:
        host, port = parse_address(text, allow_ranges=False)
    except AnsibleError:
        return False
    return port is None and host == text


def reserved_name(name, guest_group):
    """A GuestInventoryError when ``name`` (a tenant's) is a name no guest may have in the
    inventory: one Ansible keeps for the controller (``localhost``, ``127.0.0.1``, ``::1``: the guest's tasks
    would run there), a group every inventory has (``all``, ``ungrouped``) or ``guest_group`` (a
    host by a group's name stands for the group in every pattern)."""
    fix = "rename the tenant (gpuvirt_tenants[].name)"
    if name in C.LOCALHOST:
        raise GuestInventoryError("tenant %s: a name Ansible keeps for the controller (%s), where the guest's tasks would "
                                  "then run; %s" % (name, ", ".join(C.LOCALHOST), fix))
    if name in IMPLICIT_GROUPS + (guest_group,):
        raise GuestInventoryError("tenant %s: the name of a group (%s, and %s, where the guests are added), which a "
                                  "play's pattern takes for the group, not the guest; %s"
                                  % (name, ", ".join(IMPLICIT_GROUPS), guest_group, fix))


def inventory_name(name, guest_group):
    """``name`` (a tenant's) when it can be the inventory host of its guest; a GuestInventoryError
    otherwise: a :func:`reserved_name`, or what ``add_host`` would not take as one host name
    (a blank, ``:PORT``, a range, ``/``, ...)."""
    reserved_name(name, guest_group)
    if not isinstance(name, str) or not _host_name(name):
        raise GuestInventoryError("tenant %r: not an inventory host name (dot-separated labels of letters, digits, '_' "
                                  "and '-', or an IP address; no blank, ':PORT', range or '/'); rename the tenant "
                                  "(gpuvirt_tenants[].name), or list its guest in the inventory yourself (it is then "
                                  "reached as the inventory says)" % (name,))
    return name


def tcp_port(value, what):
    """``value`` as a TCP port (int 1-65535), taken from an int or a string of digits (a value
    templated into a string); None or '' is not given (None back). A boolean, a fraction, text
    or a number out of range is a GuestInventoryError naming ``what``."""
    if value is None or value == "":
        return None
    port = None
    if isinstance(value, int) and not isinstance(value, bool):
        port = value
    elif isinstance(value, str) and re.match(r"^\s*[0-9]+\s*$", value):
        port = int(value)
    if port is None or not 1 <= port <= 65535:
        raise GuestInventoryError("%s: %r is not a TCP port; give a whole number from 1 to 65535" % (what, value))
    return port


def flag(value, what, default):
    """``value`` as a boolean, as Ansible's ``bool`` options take it (``boolean(strict=True)``:
    true/false, yes/no, on/off, 1/0 and their strings); None is ``default``. Anything else (the
    string ``'maybe'``, a list) is a GuestInventoryError naming ``what``, never taken as true."""
    if value is None:
        return default
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise GuestInventoryError("%s: %r is not a boolean; give true or false (yes/no, on/off, 1/0)" % (what, value))


def proxy_jump(host):
    """The ``ProxyJump`` value (``[user@]host[:port]``, ssh_config(5)) of the jump host ``host``
    ({name, address, user, port}): ``address`` (else ``name``) a host name or an IP address, an
    IPv6 address in brackets (``[2001:db8::11]:2222``: unbracketed, ssh reads its first ':' as the
    port's), the port left out when 22. A GuestInventoryError naming the option when ``address``
    is neither (a blank would add options to ``ansible_ssh_common_args``, a ',' another jump),
    the user holds what ``user@host`` cannot carry, or the port is not one."""
    key = "address" if host.get("address") else "name"
    target = str(host.get(key) or "")
    bare = target[1:-1] if target.startswith("[") and target.endswith("]") else target
    try:
        ipv6 = ipaddress.ip_address(bare).version == 6
    except ValueError:
        ipv6 = False
    if not ipv6 and not _host_name(bare):
        raise GuestInventoryError("host.%s: %r is not a host name or an IP address (the SSH jump to the GPU host); give "
                                  "the address the controller reaches the GPU host at (ansible_host), without a port "
                                  "(that is host.port)" % (key, target))
    user = host.get("user")
    if user and not (isinstance(user, str) and USER_NAME.match(user)):
        raise GuestInventoryError("host.user: %r cannot be the user of the SSH jump (user@host: letters, digits, '.', "
                                  "'_', '-', '@', '$'; no blank, ',' or ':'); give the user the controller logs in to the "
                                  "GPU host as (ansible_user)" % (user,))
    port = tcp_port(host.get("port"), "host.port")
    jump = ("[%s]" % bare) if ipv6 else bare
    if user:
        jump = "%s@%s" % (user, jump)
    if port is not None and port != 22:
        jump += ":%d" % port
    return jump


def _dict(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GuestInventoryError("%s must be a dict, got %s" % (what, type(value).__name__))
    return value


def guest_records(tenants):
    """``tenants`` (the tenant list, gpuvirt_tenants) as the tenant records (``tenant_records``: every
    entry and the rules over the list checked once; a list of records as it is); a bad entry is a
    GuestInventoryError with the record's message (the tenant, the option and the fix)."""
    try:
        return tenant_records(tenants)
    except InputError as exc:
        raise GuestInventoryError(str(exc))


def _runs(record, running):
    """Whether tenant ``record`` runs: its state says so, or, with ``running`` (the domains that run
    on its host, read from libvirt), its domain runs and its state is neither defined nor absent."""
    if running is None:
        return record.state == "running"
    return record.name in running and record.state not in ("defined", "absent")


def _first_mac(record, placement, vfs):
    """The MAC of the tenant's RDMA NIC: its first VF's (the plan's MAC, else the tenant's, else
    derived as the tenants stage derives it), else its own first MAC, else its data NIC's (given,
    else derived); None without any."""
    own = placement.get("mac") or record.mac
    if vfs:
        return sorted(tenant_vf_macs(record.name, vfs, mac=own).items())[0][1]
    first = record.mac if isinstance(record.mac, str) else next(iter(record.mac or ()), None)
    if first is None and record.data_nic is not None:
        # a tenant without a VF: its data NIC is its RDMA NIC
        first = record.data_nic.get("mac") or data_nic_mac(record.name)
    return first


def guest_hosts(tenants, access=None, host=None, plan=None, known=None, add=True, links=None, running=None):
    """The ``add_host`` entries of the running tenants that have a guest (``image``) and a
    management address: inventory name (the tenant's), group gpuvirt_guests, ``ansible_host`` (the
    address without its prefix), ``ansible_user`` and ``ansible_port`` (the access's), with ``jump`` (default
    true: the management network is behind the GPU host) an ``ansible_ssh_common_args`` with
    ``ProxyJump`` through the GPU host (``host``: {name, address, user, port}), the GPU host's
    name, the console log, and the MAC of the tenant's RDMA NIC: its first VF (from ``plan``, the
    tenants stage's plan, or the tenant's ``mac``), else its ``data_nic``, by which the guest stage
    finds the NIC; with ``links`` (the tenants stage's ``pci_links``), a tenant's host link facts for its
    NCCL topology file. ``tenants``: the tenant list or its records (:func:`guest_records`), read from
    the records only; ``running``: the names of the domains that run (None: a tenant runs when its
    state says running). Tenants ``known`` to the inventory already (a static guest inventory) are
    left to it. ``add`` false: none (the inventory lists the guests itself)."""
    if not flag(add, "add (tenant_guests_add_hosts)", True):
        return []
    records = guest_records(tenants)
    access = _dict(access, "access (gpuvirt_guest_access)")
    host = _dict(host, "jump_host")
    placements = _dict(_dict(plan, "plan").get("placements"), "plan.placements")
    links_given = links is not None
    links = _dict(links, "links (the tenants stage's pci_links)")
    # Every input is checked before the first entry (the tenants by their records; the tenant's name as an inventory
    # host name, ports 1-65535, strict booleans, the jump as ssh takes it): a bad one is a GuestInventoryError naming
    # it and the fix, and no host is added.
    port = tcp_port(access.get("port"), "access.port (gpuvirt_guest_access.port, the guests' SSH port)")
    jump = proxy_jump(host) if flag(access.get("jump"), "access.jump (gpuvirt_guest_access.jump)", True) and host else None
    out = []
    for record in records:
        tenant_name = record.name
        address = dict((option, ip) for ip, option in tenant_addresses(record)).get("guest.address")
        if not record.image or address is None or not _runs(record, running):
            continue
        if tenant_name in (known or []):
            # listed by the inventory: reached as it says, unless its name is the controller's or a group's
            reserved_name(tenant_name, GUEST_GROUP)
            continue
        inventory_name(tenant_name, GUEST_GROUP)
        entry = {"name": tenant_name, "groups": [GUEST_GROUP], "ansible_host": address,
                 "gpuvirt_tenant_host": host.get("name"), "gpuvirt_guest_console_log": console_log_path(tenant_name)}
        if access.get("user"):
            entry["ansible_user"] = access["user"]
        if port is not None:
            entry["ansible_port"] = port
        if jump:
            entry["ansible_ssh_common_args"] = "-o ProxyJump=%s -o StrictHostKeyChecking=accept-new" % jump
        placement = placements.get(tenant_name) or {}
        vfs = placement.get("vfs") or []
        first = _first_mac(record, placement, vfs)
        if first:
            entry["gpuvirt_guest_vf_mac"] = first
        if vfs:
            # the guest stage's NCCL settings for a VM (guest_rdma): GPUDirect RDMA as far as the tenant's GPUs and
            # VFs lie apart on the host (the plan's level, as NCCL names it), relaxed ordering on
            level = GDR_LEVEL_OF.get(placement.get("pcie_affinity")) if placement.get("gpus") else None
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


def _wait_results(waited):
    """The ``results`` of a looped ``wait_for`` as registered (a dict; a wait skipped as a whole has none)."""
    if not isinstance(waited, dict):
        raise GuestWaitError("waited: expected the looped wait's registered result (a dict), got %s" % type(waited).__name__)
    results = waited.get("results") or []
    if not isinstance(results, list):
        raise GuestWaitError("waited.results: expected the results of the looped wait (a list), got %s" % type(results).__name__)
    return results


def wait_times(waited):
    """``[[name, seconds]]``: each guest of a looped ``wait_for`` over guest_hosts entries (its
    registered result ``waited``, each result with its ``item``) and the seconds it was waited for
    (``?`` where the result has none)."""
    times = []
    for result in _wait_results(waited):
        item = result.get("item") if isinstance(result, dict) else None
        if not isinstance(item, dict) or not item.get("name"):
            raise GuestWaitError("waited: each result is a wait over a guest_hosts entry (its item with a name), got %r"
                                 % (result,))
        times.append([item["name"], result.get("elapsed", "?")])
    return times


def wait_failures(waited, host_name=None):
    """The guests that did not answer SSH: one message each, naming the tenant, its address, how
    long it was waited for and its console log on the GPU host. ``waited``: the registered result
    of a looped ``wait_for`` over guest_hosts entries (each result with its ``item``)."""
    out = []
    for result in _wait_results(waited):
        # a wait run with failed_when false keeps no failed flag: an answer has its port
        if not isinstance(result, dict) or result.get("skipped") or (not result.get("failed") and result.get("port")):
            continue
        item = result.get("item") or {}
        out.append("tenant %s did not answer SSH on %s:%s within %ss (%s); read its console log %s on %s"
                   % (item.get("name"), item.get("ansible_host"), item.get("ansible_port", 22), result.get("elapsed", "?"),
                      (result.get("msg") or "no answer").strip(), item.get("gpuvirt_guest_console_log"),
                      host_name or item.get("gpuvirt_tenant_host") or "its GPU host"))
    return out
