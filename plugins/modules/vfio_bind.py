#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: vfio_bind
short_description: Bind PCI devices to vfio-pci or pci-stub, safely and persistently
description:
  - Binds PCI devices to C(vfio-pci) (or C(pci-stub)), or hands them back to their host driver,
    the way driverctl does it, through C(driver_override), unbind and C(/sys/bus/pci/drivers_probe).
    C(new_id) is never used (it would take every device with that id).
  - IOMMU groups. A VFIO user gets a whole IOMMU group. With O(group_policy=strict) every other endpoint of the
    group (bridges aside) must already be on vfio-pci or pci-stub, or have no driver. With
    O(group_policy=bind_group) those endpoints are bound too.
  - Refuses, unless O(force), any device the host needs. That is the device of a netdev carrying a
    default route or the current SSH connection, a block device with a mounted filesystem or
    active swap, or the boot disk's controller. The refusal names the device, the reason and the way out.
  - Refuses to unbind a device from vfio-pci while its C(/dev/vfio/N) is held open or a libvirt
    domain uses it, unless O(force).
  - With the IOMMU off, binding to vfio-pci fails and names the boot argument to add. A device with no IOMMU group is
    refused for vfio-pci before anything is unbound (in check mode too); unbound, it would be left with no driver.
  - With O(persist=true) the binding comes back at boot. A udev rule sets C(driver_override) when
    the device is added, before any host driver module loads, and C(vfio-pci) is loaded early
    (C(/etc/modules-load.d)). C(gpuvirt-vfio.service), ordered before libvirtd, rebinds devices
    that a built-in driver (pci-stub pre-binding) or a VF re-creation left elsewhere.
version_added: 0.1.0
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
options:
  devices:
    description: PCI addresses of the devices (V(0000:82:00.0)).
    type: list
    elements: str
  ids:
    description: Select every device with these C(vendor:device) ids (V(10de:2330); four hex digits each, optionally C(0x)-prefixed).
    type: list
    elements: str
  vfs_of:
    description: Select every VF of these PFs (PCI address or netdev name).
    type: list
    elements: str
  driver:
    description:
      - V(vfio-pci) or V(pci-stub), or V(host) to clear C(driver_override) and hand the device back
        to its default host driver.
    type: str
    choices: [vfio-pci, pci-stub, host]
    default: vfio-pci
  group_policy:
    description:
      - V(strict) fails when another endpoint of a device's IOMMU group is on a host driver;
        V(bind_group) binds those endpoints too (still refusing devices the host needs).
    type: str
    choices: [strict, bind_group]
    default: strict
  persist:
    description:
      - Restore the binding at boot (C(/etc/gpuvirt/vfio.json), C(/etc/udev/rules.d/61-gpuvirt-vfio.rules),
        C(/etc/modules-load.d/gpuvirt-vfio.conf), C(gpuvirt-vfio.service)). With O(driver=host) the
        devices are removed from those files.
      - V(false) leaves existing boot files untouched.
    type: bool
    default: true
  force:
    description: Take devices the host needs, or unbind devices in use by tenants.
    type: bool
    default: false
  sriov:
    description:
      - VFs first, in the same call - the options of M(gpuvirt.tenancy.sriov_vfs) (C(pf), or C(pfs) with
        C(vf_settings)), validated as that module validates them - so that creating the VFs, their MAC/VLAN and
        binding them is one round trip.
      - This module's own selectors are checked against the host before the VFs change; O(vfs_of) then takes the VFs
        as the SR-IOV part left them. In check mode the VFs that part would create do not exist yet - their PFs are
        listed in RV(vfs_to_come) and not bound.
      - With it, naming no device to bind is allowed (the call then only sets the VFs).
    type: dict
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
notes:
  - Needs root.
seealso:
  - module: gpuvirt.tenancy.sriov_vfs
  - name: VFIO - Virtual Function I/O (kernel documentation)
    description: IOMMU groups, viability, /dev/vfio/N.
    link: https://docs.kernel.org/driver-api/vfio.html
"""

EXAMPLES = r"""
- name: Tenant GPU to vfio-pci, from the pci-stub pre-binding
  gpuvirt.tenancy.vfio_bind:
    devices: ["0000:82:00.0"]

- name: The SR-IOV/VFIO stage in one call - VFs with their tenants' VLANs, then GPUs and VFs to vfio-pci
  gpuvirt.tenancy.vfio_bind:
    devices: ["0000:82:00.0"]
    vfs_of: ["0000:41:00.0"]
    sriov:
      pfs:
        - {pf: "0000:41:00.0", num_vfs: 4, autoprobe: false}
      vf_settings:
        - {address: "0000:41:00.2", mac: "52:54:00:a0:00:01", vlan: 101}

- name: Every VF of the ConnectX PF to vfio-pci
  gpuvirt.tenancy.vfio_bind:
    vfs_of: ["0000:81:00.0"]

- name: A GPU and its audio function, which share an IOMMU group
  gpuvirt.tenancy.vfio_bind:
    devices: ["0000:01:00.0"]
    group_policy: bind_group

- name: Hand a device back to the host driver
  gpuvirt.tenancy.vfio_bind:
    devices: ["0000:82:00.0"]
    driver: host
"""

RETURN = r"""
devices:
  description: One entry per device bound (group members added by bind_group included).
  returned: always
  type: list
  elements: dict
  contains:
    address:
      description: PCI address.
      type: str
      sample: "0000:82:00.0"
    driver_before:
      description: Driver before, null when driverless.
      type: str
      sample: "pci-stub"
    driver_after:
      description: Driver after (predicted in check mode; null when handed back in check mode).
      type: str
      sample: "vfio-pci"
    iommu_group:
      description: IOMMU group number.
      type: int
      sample: 41
    vfio_device:
      description: The VFIO group device a VMM opens, for vfio-pci.
      type: str
      sample: "/dev/vfio/41"
    group_added:
      description: Whether the device was added by O(group_policy=bind_group).
      type: bool
      sample: false
  sample:
    - {address: "0000:82:00.0", driver_before: pci-stub, driver_after: vfio-pci, iommu_group: 15,
       vfio_device: /dev/vfio/15, group_added: false}
isolation:
  description: Whether the selected devices can go to different tenants.
  returned: always
  type: dict
  sample: {viable: true, groups: {"0000:82:00.0": 15}, reasons: []}
persisted_files:
  description: Boot files written (would be written in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/gpuvirt/vfio.json, /etc/udev/rules.d/61-gpuvirt-vfio.rules]
sriov:
  description: With O(sriov), the result of M(gpuvirt.tenancy.sriov_vfs) for it; null without it.
  returned: always
  type: dict
  sample: {changed: false, pfs: [{pf: "0000:41:00.0", num_vfs: 4}], vf_settings_skipped: []}
vfs_to_come:
  description: PFs of O(vfs_of) whose VFs O(sriov) creates, so not bound in check mode.
  returned: always
  type: list
  elements: str
  sample: []
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vfio import VFIO_BIND_ARGS, vfio_bind

MODULE_ARGS = VFIO_BIND_ARGS


def main(host=None):
    run_module(MODULE_ARGS, vfio_bind, host=host)


if __name__ == "__main__":
    main()
