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
  - An SR-IOV PF whose VFs go to tenants (a PF of O(sriov_pfs), O(sriov) or O(vfs_of), or one with a VF a tenant holds)
    stays on its host driver. It is never bound, named or along with its group, not even with O(force). A device
    whose IOMMU group holds such a PF, or a device the host needs, is refused with either policy, naming the fix
    (enable ACS, move the card to a slot with its own IOMMU group, or keep the device for the host), as the placement
    planner leaves such a group's GPUs and VFs out.
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
  - The SR-IOV/VFIO stage in one call. Given the stage's desired state as the inventory says it (O(sriov_pfs),
    O(gpus), O(devices)), the module works the rest out on the host from the host model it reads. It makes the VFs of
    every PF (as M(gpuvirt.tenancy.sriov_vfs) does, with the options that module takes), reads the host again, and binds
    the VFs of the PFs with VFs, the tenant GPUs and the functions that share their IOMMU groups (RV(companions)). Every
    input is checked before the first write.
  - The tenants' VFs get their MAC, VLAN, spoof check and trust from the tenants stage (M(gpuvirt.tenancy.tenant_domain)),
    which picks each tenant's VFs from its VF count; this module reads no tenant. The option C(tenants) is gone (an
    unsupported parameter) - give each tenant's C(vfs) as a count with its C(mac) and C(vlan) in C(gpuvirt_tenants).
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
        V(bind_group) binds those endpoints too (still refusing devices the host needs and SR-IOV PFs whose VFs go to
        tenants, whose group goes to no tenant).
    type: str
    choices: [strict, bind_group]
    default: strict
  persist:
    description:
      - Restore the binding at boot (with O(sriov_pfs), the VFs and their settings too) (C(/etc/gpuvirt/vfio.json), C(/etc/udev/rules.d/61-gpuvirt-vfio.rules),
        C(/etc/modules-load.d/gpuvirt-vfio.conf), C(gpuvirt-vfio.service)). With O(driver=host) the
        devices are removed from those files.
      - V(false) leaves existing boot files untouched.
    type: bool
    default: true
  force:
    description:
      - Take devices the host needs, or unbind devices in use by tenants.
      - With O(sriov_pfs), also change VF counts while tenants hold VFs.
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
      - The options of M(gpuvirt.tenancy.sriov_vfs) worked out on the controller. O(sriov_pfs) gives the same call from
        the inventory's desired state instead. Mutually exclusive with it.
    type: dict
  sriov_pfs:
    description:
      - The PFs and their VF counts as the inventory gives them (C(gpuvirt_sriov_pfs)). Every PF gets its VFs first, in
        this call, as M(gpuvirt.tenancy.sriov_vfs) makes them (through 0 when a count changes; O(autoprobe), O(persist)
        and O(force) apply to them). Then every VF of each PF with O(sriov_pfs[].num_vfs) above 0 is bound (the
        PF is added to O(vfs_of)).
      - In check mode the VFs a PF does not have yet cannot be bound. Their PFs are listed in RV(vfs_to_come).
      - An empty list makes no VF. With it, naming no device to bind is allowed.
    type: list
    elements: dict
    suboptions:
      pf:
        description: The PF, by PCI address or netdev name.
        type: str
        required: true
      num_vfs:
        description: Its VF count; V(0) removes its VFs.
        type: int
        required: true
      autoprobe:
        description: Whether host drivers probe its new VFs; unset, O(autoprobe).
        type: bool
      link_type:
        description: For the boot stage's ConnectX firmware (M(gpuvirt.tenancy.iommu_grub)); not used here.
        type: str
  gpus:
    description:
      - The tenant GPU pool (C(gpuvirt_gpus)), bound with the functions that share their IOMMU groups and go along to the
        tenants with them (a GPU's audio function, see RV(companions)). These are the functions the placement planner gives
        the tenants with their GPUs (filter P(gpuvirt.tenancy.tenant_group_devices#filter)). Each must be a GPU of the host
        model (see O(gpu_ids)).
      - A GPU the planner leaves out for its IOMMU group (the group also holds a function the host keeps, such as an SR-IOV
        PF, a NIC or another GPU outside the pool) is refused with the planner's reason and fix.
    type: list
    elements: str
  fabric_vm:
    description:
      - The Fabric Manager service VM as the tenants stage takes it (M(gpuvirt.tenancy.tenant_domain)'s O(gpuvirt.tenancy.tenant_domain#module:fabric_vm));
        only its C(nvswitches) is read (default every NVSwitch of the host model, an NVIDIA function of PCI class 0x0680),
        and those are bound to vfio-pci as O(devices) are, so that the service VM's domain can hold them (see RV(nvswitches)).
      - Refused on a host without NVSwitches, for an address that is no NVSwitch of the host, and for an NVSwitch whose
        IOMMU group holds anything but NVSwitches and bridges.
    type: dict
  gpu_ids:
    description: Extra C(vendor:device) PCI ids read as GPUs in the host model (C(gpuvirt_gpu_pci_ids)), for O(gpus).
    type: list
    elements: str
    default: []
  autoprobe:
    description: With O(sriov_pfs), whether host drivers probe new VFs (a PF's own C(autoprobe) wins).
    type: bool
    default: false
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

- name: VFs with explicit per-VF settings (sriov_vfs's options), then GPUs and VFs to vfio-pci, in one call
  gpuvirt.tenancy.vfio_bind:
    devices: ["0000:82:00.0"]
    vfs_of: ["0000:41:00.0"]
    sriov:
      pfs:
        - {pf: "0000:41:00.0", num_vfs: 4, autoprobe: false}
      vf_settings:
        - {address: "0000:41:00.2", mac: "52:54:00:a0:00:01", vlan: 101}

- name: The SR-IOV/VFIO stage from the inventory's desired state, decided on the host
  gpuvirt.tenancy.vfio_bind:
    sriov_pfs: "{{ gpuvirt_sriov_pfs }}"
    gpus: "{{ gpuvirt_gpus }}"
    gpu_ids: "{{ gpuvirt_gpu_pci_ids }}"
    devices: []

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
companions:
  description: With O(gpus), the functions that share the IOMMU groups of the tenant GPUs (and VFs) and are bound with them.
  returned: always
  type: list
  elements: str
  sample: ["0000:01:00.1"]
nvswitches:
  description: With O(fabric_vm), the NVSwitches of the Fabric Manager service VM, bound with the devices.
  returned: always
  type: list
  elements: str
  sample: ["0000:6d:00.0"]
sriov:
  description:
    - With O(sriov) or O(sriov_pfs), the result of M(gpuvirt.tenancy.sriov_vfs) for it (C(pfs), one entry per PF with its
      C(vfs), and C(vf_settings_skipped)); null without them.
    - Under a captured tree (O(root) other than V(/), a preview) C(ip) is not asked for the VFs' current settings. A PF's
      C(settings_not_read) says so, and every VF setting asked is shown as to be set.
  returned: always
  type: dict
  sample: {changed: false, pfs: [{pf: "0000:41:00.0", num_vfs: 4}], vf_settings_skipped: []}
vfs_to_come:
  description:
    - PFs whose VFs the SR-IOV part of this call creates (O(sriov), O(sriov_pfs)), so not bound in check mode; a run binds
      them.
  returned: always
  type: list
  elements: str
  sample: []
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.vfio import VFIO_BIND_ARGS, vfio_bind

MODULE_ARGS = VFIO_BIND_ARGS


def main(host=None):
    run_module(MODULE_ARGS, vfio_bind, host=host)


if __name__ == "__main__":
    main()
