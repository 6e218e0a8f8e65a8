# -*- coding: utf-8 -*-
"""A domain's host PCI devices. The elements are the examples of libvirt's domain XML format
documentation (https://libvirt.org/formatdomain.html, "Host device assignment" and
"PCI Passthrough" of network interfaces)."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_devices import xml_device_addresses

DOMAIN = """<domain type='kvm'>
  <name>tenant-a</name>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0x06' slot='0x02' function='0x0'/>
      </source>
      <boot order='1'/>
      <rom bar='on' file='/etc/fake/boot.bin'/>
    </hostdev>
    <hostdev mode='subsystem' type='usb'>
      <source>
        <vendor id='0x1234'/>
        <product id='0xbeef'/>
      </source>
    </hostdev>
    <interface type='hostdev' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address type='pci' domain='0x0000' bus='0x00' slot='0x07' function='0x0'/>
      </source>
      <mac address='52:54:00:6d:90:02'/>
      <virtualport type='802.1Qbh'>
        <parameters profileid='finance'/>
      </virtualport>
    </interface>
    <interface type='network'>
      <source network='default'/>
    </interface>
  </devices>
</domain>
"""


def test_pci_hostdevs_then_hostdev_interfaces():
    assert xml_device_addresses(DOMAIN) == ["0000:06:02.0", "0000:00:07.0"]


def test_not_xml_holds_nothing():
    assert xml_device_addresses("not xml <") == [] and xml_device_addresses("<domain/>") == []
