# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants' management network as a libvirt network (``tenant_domain``'s
``management_network``): NAT to the host's uplink (or routed, or isolated), the host's address on
it, no DHCP (each guest's address is in its cloud-init seed), started and set to start at boot.

Decide, then act: :class:`NetworkPlan` reads the network through the connection and refuses one
of that name that is not the one asked for (a network the tenants' guests use is never
redefined); :meth:`NetworkPlan.apply` defines, starts and sets autostart.
"""

from __future__ import absolute_import, division, print_function

import xml.etree.ElementTree as ET

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.ipv4 import check_ipv4
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import LibvirtError

__metaclass__ = type

FORWARD_MODES = ("nat", "route", "none")
NETWORK_OPTIONS = dict(
    name=dict(type="str", required=True),
    address=dict(type="str", required=True),
    forward=dict(type="str", default="nat", choices=list(FORWARD_MODES)),
    bridge=dict(type="str"),
)


def _prefix_of_netmask(netmask):
    bits = "".join(format(int(part), "08b") for part in netmask.split("."))
    return bits.count("1") if "01" not in bits else None


def network_xml(spec):
    """The definition of the network ``spec`` asks for (name, forward, bridge, host address)."""
    root = ET.Element("network")
    ET.SubElement(root, "name").text = spec["name"]
    if spec["forward"] != "none":
        ET.SubElement(root, "forward", {"mode": spec["forward"]})
    if spec.get("bridge"):
        ET.SubElement(root, "bridge", {"name": spec["bridge"], "stp": "on", "delay": "0"})
    address, prefix = spec["address"].split("/")
    ET.SubElement(root, "ip", {"address": address, "prefix": prefix})
    return ET.tostring(root, encoding="unicode")


def read_network(text):
    """{forward, address (with prefix), bridge} of a network definition."""
    root = ET.fromstring(text)
    forward = root.find("forward")
    ips = [ip for ip in root.findall("ip") if ip.get("family", "ipv4") == "ipv4"]
    address = None
    if ips:
        prefix = ips[0].get("prefix") or (_prefix_of_netmask(ips[0].get("netmask")) if ips[0].get("netmask") else None)
        address = "%s/%s" % (ips[0].get("address"), prefix)
    bridge = root.find("bridge")
    return {"forward": forward.get("mode", "nat") if forward is not None else "none", "address": address,
            "bridge": bridge.get("name") if bridge is not None else None}


class NetworkPlan:
    """What the management network needs: defined, started, autostart."""

    def __init__(self, conn, spec):
        self.spec = spec
        check_ipv4(spec["address"], "management_network.address", True)
        self.network = conn.network(spec["name"])
        self.conn = conn
        self.define = self.network is None
        if self.network is not None:
            have = read_network(self.network.definition())
            want = {"forward": spec["forward"], "address": spec["address"]}
            if dict((k, have[k]) for k in want) != want or (spec.get("bridge") and have["bridge"] != spec["bridge"]):
                raise InputError("management_network: libvirt network %s exists with forward %s, address %s, bridge %s, not "
                                 "forward %s, address %s%s; nothing was changed. Give its settings, or another name (a "
                                 "network in use is never redefined)" % (
                                     spec["name"], have["forward"], have["address"], have["bridge"], spec["forward"],
                                     spec["address"], ", bridge %s" % spec["bridge"] if spec.get("bridge") else ""))
        self.start = self.define or not self.network.is_active()
        self.autostart = self.define or not self.network.autostart()
        self.xml = network_xml(spec) if self.define else self.network.definition()

    @property
    def changed(self):
        return self.define or self.start or self.autostart

    def diff(self):
        if not self.changed:
            return []
        header = "network %s" % self.spec["name"]
        steps = [step for step, due in (("define", self.define), ("start", self.start), ("autostart", self.autostart)) if due]
        return [{"before_header": header, "after_header": header, "before": "" if self.define else self.xml,
                 "after": self.xml + "\n" + "".join("%s\n" % s for s in steps)}]

    def apply(self, run):
        name = self.spec["name"]
        try:
            if self.define:
                self.network = self.conn.define_network(self.xml)
                run.changed = True
            if self.start:
                self.network.start()
                run.changed = True
            if self.autostart:
                self.network.set_autostart(True)
                run.changed = True
        except LibvirtError as exc:
            raise StateError("the management network %s: %s" % (name, exc))

    def result(self):
        return {"name": self.spec["name"], "address": self.spec["address"], "forward": self.spec["forward"],
                "defined": self.define, "started": self.start, "autostart_set": self.autostart, "changed": self.changed}
