# -*- coding: utf-8 -*-
"""The management network's definition, built and read back (pure); the network on libvirt's
test driver is tested through tenant_domain (tests/unit/plugins/modules/test_tenant_domain.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.network import NetworkPlan, network_xml, read_network

# the default network as libvirt's network XML format documents it (libvirt.org/formatnetwork.html, "NAT based network")
DEFAULT = """<network>
  <name>default</name>
  <bridge name="virbr0"/>
  <forward mode="nat"/>
  <ip address="192.168.122.1" netmask="255.255.255.0">
    <dhcp>
      <range start="192.168.122.2" end="192.168.122.254"/>
    </dhcp>
  </ip>
  <ip family="ipv6" address="2001:db8:ca2:2::1" prefix="64"/>
</network>"""


def test_built_and_read_back():
    spec = {"name": "gpuvirt-mgmt", "address": "192.168.150.1/24", "forward": "nat", "bridge": "virbr-gpuvirt"}
    assert read_network(network_xml(spec)) == {"forward": "nat", "address": "192.168.150.1/24", "bridge": "virbr-gpuvirt"}
    isolated = dict(spec, forward="none", bridge=None)
    assert "<forward" not in network_xml(isolated) and read_network(network_xml(isolated))["forward"] == "none"


def test_a_netmask_is_read_as_its_prefix():
    assert read_network(DEFAULT) == {"forward": "nat", "address": "192.168.122.1/24", "bridge": "virbr0"}


def test_a_bad_address_is_refused_before_libvirt_is_asked():
    with pytest.raises(InputError, match="management_network.address: '192.168.150.1' is not an IPv4 address with its prefix"):
        NetworkPlan(None, {"name": "n", "address": "192.168.150.1", "forward": "nat", "bridge": None})
