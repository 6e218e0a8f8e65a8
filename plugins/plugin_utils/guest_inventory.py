# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side checks of what the filter ``gpuvirt.tenancy.guest_hosts`` writes into the
inventory: a tenant's name as an inventory host name, the guests' and the jump host's SSH ports,
the access's booleans, and the jump host as ``ssh -o ProxyJump`` takes it. Pure: each function
returns the value to use or raises a :class:`GuestInventoryError` whose message names the input and
the fix."""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

from ansible import constants as C
from ansible.errors import AnsibleError, AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.parsing.utils.addresses import parse_address

__metaclass__ = type

# The plan's GPU-to-VF level (nvidia-smi's names) as NCCL_NET_GDR_LEVEL names it: NCCL's PHB covers both
# nvidia-smi's PHB and NODE (through host bridges of one CPU), its SYS crosses CPUs (guest_hosts writes
# it into a guest's facts; the tenants stage's preview report shows it).
GDR_LEVEL_OF = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}


class GuestInventoryError(AnsibleFilterError):
    """An input guest_hosts cannot write into the inventory: the filter's error, its message
    naming the input and the fix, and that no host was added."""

    def __init__(self, message):
        super(GuestInventoryError, self).__init__("gpuvirt.tenancy.guest_hosts: %s; no host was added" % message)


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
