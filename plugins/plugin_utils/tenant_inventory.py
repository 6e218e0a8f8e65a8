# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory plugin ``gpuvirt.tenancy.tenants`` on the controller: each GPU host's libvirt
URI as the controller reaches it, the domains running there (libvirt-python, guarded), and the
guests of the running tenants as inventory entries, built by the same code as the role
``tenant_guests``'s ``add_host`` entries (plugin_utils ``guest_inventory.guest_hosts``: the tenant's name, its
management address, the SSH jump through its GPU host). Errors are :class:`TenantInventoryError`,
whose message names the host, the input and the fix."""

from __future__ import absolute_import, division, print_function

import ipaddress
import xml.etree.ElementTree as ET

from ansible.errors import AnsibleParserError

try:
    import libvirt
except ImportError:
    libvirt = None

__metaclass__ = type

URI_VARIABLE = "gpuvirt_inventory_libvirt_uri"


class TenantInventoryError(AnsibleParserError):
    """An input or a GPU host's libvirt the plugin cannot list tenants from; nothing is added."""

    def __init__(self, message):
        super(TenantInventoryError, self).__init__("gpuvirt.tenancy.tenants: %s; no guest was added" % message)


def libvirt_uri(name, hostvars):
    """The URI of GPU host ``name``'s libvirt from the controller: its ``gpuvirt_inventory_libvirt_uri``,
    else ``qemu+ssh://[ansible_user@]ansible_host[:ansible_port]/system`` (libvirt's SSH transport, the
    address and user the plays reach the host with; an IPv6 address in brackets)."""
    given = hostvars.get(URI_VARIABLE)
    if given:
        if not isinstance(given, str):
            raise TenantInventoryError("host %s: %s must be a libvirt URI string, got %r" % (name, URI_VARIABLE, given))
        return given
    address = str(hostvars.get("ansible_host") or name)
    try:
        if ipaddress.ip_address(address).version == 6:
            address = "[%s]" % address
    except ValueError:
        pass
    user = hostvars.get("ansible_user")
    port = hostvars.get("ansible_port")
    return "qemu+ssh://%s%s%s/system" % ("%s@" % user if user else "", address,
                                         ":%s" % port if port not in (None, "", 22, "22") else "")


def running_domains(name, uri):
    """{domain name: its XML} of the domains running on ``uri`` (GPU host ``name``'s libvirt)."""
    if libvirt is None:
        raise TenantInventoryError("libvirt-python is required on the controller (module 'libvirt' could not be imported): "
                                   "install python3-libvirt, or in a virtualenv pip install libvirt-python after libvirt's "
                                   "headers (libvirt-dev pkg-config gcc python3-dev); the collection's execution "
                                   "environment holds it")
    libvirt.registerErrorHandler(lambda *_args: None, None)
    try:
        conn = libvirt.openReadOnly(uri)
    except libvirt.libvirtError as exc:
        raise TenantInventoryError("host %s: cannot read its libvirt at %s: %s; make it reachable from the controller "
                                   "(an SSH key the controller's user is let in with), or give the host the variable %s"
                                   % (name, uri, exc, URI_VARIABLE))
    try:
        return dict((dom.name(), dom.XMLDesc(0)) for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE))
    except libvirt.libvirtError as exc:
        raise TenantInventoryError("host %s: listing the domains of %s failed: %s" % (name, uri, exc))
    finally:
        conn.close()


def first_vf_mac(domain_xml):
    """The MAC of a domain's first VF passed as a hostdev interface, or None."""
    for interface in ET.fromstring(domain_xml).findall("devices/interface"):
        mac = interface.find("mac")
        if interface.get("type") == "hostdev" and mac is not None and mac.get("address"):
            return mac.get("address").lower()
    return None


def guest_entries(name, hostvars, running, known):
    """The inventory entries of GPU host ``name``'s guests: its tenants (``gpuvirt_tenants``, read as
    the tenant records) whose domain runs (``running``: {domain: XML}), whose state is neither defined
    nor absent, and that have an ``image`` and a ``guest.address``, reached as ``gpuvirt_guest_access``
    says, through the host (``guest_inventory.guest_hosts``); ``known``: the inventory's hosts (a guest
    listed there is left as it is). A tenant entry the record refuses fails the host with the record's
    message."""
    from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.guest_inventory import (  # pylint: disable=import-outside-toplevel
        GuestInventoryError, guest_hosts)
    host = {"name": name, "address": hostvars.get("ansible_host") or name, "user": hostvars.get("ansible_user") or "",
            "port": hostvars.get("ansible_port") or 22}
    try:
        entries = guest_hosts(hostvars.get("gpuvirt_tenants") or [], hostvars.get("gpuvirt_guest_access") or {}, host, None,
                              known, running=set(running))
    except GuestInventoryError as exc:
        raise TenantInventoryError("host %s: %s" % (name, exc))
    for entry in entries:
        mac = first_vf_mac(running[entry["name"]])
        if mac:
            entry["gpuvirt_guest_vf_mac"] = mac
    return entries
