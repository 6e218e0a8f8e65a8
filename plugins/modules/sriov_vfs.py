#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sriov_vfs
short_description: SR-IOV virtual functions of a PF, safely and persistently
description:
  - Sets the number of SR-IOV virtual functions (VFs) of a physical function (PF) through
    C(sriov_numvfs). The kernel refuses a new non-zero count while VFs exist (EBUSY), so a
    change always goes through 0, which removes every VF.
  - Going through 0 is refused while any VF is bound to vfio-pci with its C(/dev/vfio/N) held
    open by a process, or is a PCI hostdev of a libvirt domain (defined or running), unless O(force).
  - Sets C(sriov_drivers_autoprobe) before creating VFs; with O(autoprobe=false) new VFs stay
    driverless, ready for M(gpuvirt.tenancy.vfio_bind).
  - Applies per-VF MAC, VLAN, QoS, spoof check, trust and link state through the PF's netdev
    (C(ip link set dev PF vf N ...)); spoof check on and trust off unless set.
  - With O(persist=true) the VFs and their settings are recreated at every boot before libvirtd,
    by C(gpuvirt-sriov.service) from C(/etc/gpuvirt/sriov.json).
  - Reports whether the VFs can go to different tenants (each in an IOMMU group of its own).
version_added: 0.1.0
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
requirements:
  - C(ip) (iproute2) on the managed host, for per-VF MAC, VLAN, QoS, spoof check, trust and link state (not asked under a
    captured tree, O(root) other than V(/), where the VFs' settings are not read, see RV(settings_not_read))
options:
  pf:
    description:
      - The PF, as a PCI address (V(0000:81:00.0)) or the name of its netdev (V(ens1f0np0)).
      - Give O(pf) (with the options below) or O(pfs).
    type: str
  num_vfs:
    description:
      - Number of VFs wanted, 0 to C(sriov_totalvfs). Omitted keeps the current count.
    type: int
  autoprobe:
    description:
      - Whether drivers probe new VFs (C(sriov_drivers_autoprobe)). V(false) leaves new VFs
        driverless, so no host driver touches them before vfio-pci takes them. Omitted keeps
        the current value.
    type: bool
  vfs:
    description:
      - Per-VF settings, applied through the PF's netdev. A PF without a netdev cannot take them.
      - An InfiniBand PF (an IPoIB netdev, or VFs C(ip link show) lists as C(link/infiniband)) cannot take them either,
        since its VFs have no MAC, VLAN or spoof check. They are refused, before any change, naming the PF; set its port to
        Ethernet (C(LINK_TYPE_P1=ETH(2)), the boot stage's firmware settings) first.
      - Settings of VFs not named here are left as they are, on the host and in the boot config.
    type: list
    elements: dict
    default: []
    suboptions:
      index:
        description: VF index, 0 to O(num_vfs) - 1. Give O(vfs[].index) or O(vfs[].address).
        type: int
      address:
        description: PCI address of the VF (existing, or the one it gets from the PF's routing offset/stride).
        type: str
      mac:
        description:
          - Unicast MAC address of the VF. The all-zero, broadcast and multicast addresses are refused (to clear a VF's
            MAC, give O(vfs[].clear)).
          - A MAC is one VF's - two VFs of the call, or a VF and another VF of the PF that keeps it, cannot share one.
        type: str
      vlan:
        description: VLAN id the PF tags the VF's traffic with, 1-4094, or 0 for none.
        type: int
      clear:
        description: Clear the VF's MAC and VLAN (what a VF given back by a tenant gets); leave O(vfs[].mac) and O(vfs[].vlan) out.
        type: bool
        default: false
      qos:
        description: 802.1p priority of that VLAN, 0-7 (needs O(vfs[].vlan)).
        type: int
      spoofchk:
        description: MAC/VLAN spoof checking. V(false) warns (the guest can send with another MAC or VLAN).
        type: bool
        default: true
      trust:
        description: Trusted mode (lets the VF change its MAC and use promiscuous mode). V(true) warns.
        type: bool
        default: false
      link_state:
        description: VF link state.
        type: str
        choices: [auto, enable, disable]
  pf_link_up:
    description:
      - Bring the PF's netdev up (administratively) when O(vfs) sets anything, now and at every
        boot with O(persist=true). libvirt refuses to start a domain that holds one of its VFs as
        C(<interface type='hostdev'>) while the PF is down, and a PF that no network
        configuration names stays down after a reboot.
      - V(false) leaves the PF's link as it is. The link is never taken down.
    type: bool
    default: true
  persist:
    description:
      - Recreate the VFs and their settings at every boot, before libvirtd. Writes
        C(/etc/gpuvirt/sriov.json), the script C(/usr/local/libexec/gpuvirt/gpuvirt-sriov-vfio) and
        the enabled unit C(gpuvirt-sriov.service) (V(WantedBy=multi-user.target), V(Before=libvirtd.service)).
      - V(false) leaves existing boot files untouched.
    type: bool
    default: true
  force:
    description:
      - Change the count even when VFs are in use by tenants (their VMs lose the device).
    type: bool
    default: false
  pfs:
    description:
      - Several PFs in one call (one round trip for a host with many ConnectX ports), each
        entry a dict of the options above for one PF (O(pf) required in each), handled in list
        order; each PF is listed once.
      - Mutually exclusive with the per-PF options at the top level.
      - An error in one entry names the entry and its PF and stops there; the result's RV(pfs)
        says what the PFs before it did.
    type: list
    elements: dict
  vf_settings:
    description:
      - With O(pfs), settings of VFs named by PCI address (given explicitly, per VF), each applied on
        the PF of O(pfs) that owns the VF once its count is set - the VFs it has, or the addresses its routing
        offset/stride gives the VFs this call creates - so VFs and their settings are one call even on a bare host.
      - A VF of no PF listed, or of a PF without a netdev, is not set and is listed in RV(vf_settings_skipped)
        with the reason.
      - Each entry takes the keys of O(vfs) (O(vf_settings[].address) required, no index).
    type: list
    elements: dict
    suboptions:
      address:
        description: PCI address of the VF.
        type: str
        required: true
      mac:
        description: MAC address, as in O(vfs[].mac).
        type: str
      vlan:
        description: VLAN, as in O(vfs[].vlan).
        type: int
      qos:
        description: VLAN priority, as in O(vfs[].qos).
        type: int
      spoofchk:
        description: Spoof check, as in O(vfs[].spoofchk).
        type: bool
        default: true
      trust:
        description: Trust, as in O(vfs[].trust).
        type: bool
        default: false
      link_state:
        description: Link state, as in O(vfs[].link_state).
        type: str
        choices: [auto, enable, disable]
      clear:
        description: Clear the MAC and VLAN, as in O(vfs[].clear).
        type: bool
        default: false
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
notes:
  - Needs root. VF settings need C(ip) from iproute2.
  - The VF numbering and addresses come from the PF's C(sriov_offset)/C(sriov_stride).
seealso:
  - module: gpuvirt.tenancy.vfio_bind
  - name: Linux PCI sysfs ABI (sriov_numvfs, sriov_drivers_autoprobe)
    description: Documentation/ABI/testing/sysfs-bus-pci in the kernel tree.
    link: https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci
"""

EXAMPLES = r"""
- name: Four driverless VFs on the ConnectX PF, recreated at boot
  gpuvirt.tenancy.sriov_vfs:
    pf: "0000:81:00.0"
    num_vfs: 4
    autoprobe: false

- name: Tenant MAC and VLAN on VF 0 and 1 of a PF with a netdev
  gpuvirt.tenancy.sriov_vfs:
    pf: ens1f0np0
    num_vfs: 8
    autoprobe: false
    vfs:
      - index: 0
        mac: "52:54:00:a0:00:01"
        vlan: 101
      - index: 1
        mac: "52:54:00:b0:00:01"
        vlan: 102

- name: Every ConnectX PF of the host in one call, with its tenants' VF settings
  gpuvirt.tenancy.sriov_vfs:
    pfs:
      - pf: "0000:41:00.0"
        num_vfs: 4
        autoprobe: false
        vfs:
          - index: 0
            mac: "52:54:00:a0:00:01"
            vlan: 101
      - pf: "0000:c1:00.0"
        num_vfs: 4
        autoprobe: false

- name: Shrink to 2 VFs even though a tenant still holds one
  gpuvirt.tenancy.sriov_vfs:
    pf: "0000:81:00.0"
    num_vfs: 2
    force: true
"""

RETURN = r"""
pfs:
  description:
    - With O(pfs), the result of each PF in list order (the fields below, per PF); the
      top-level fields below are then absent.
  returned: with O(pfs)
  type: list
  elements: dict
  sample: [{pf: "0000:41:00.0", num_vfs: 4, changed: false}]
vfs_by_pf:
  description: With O(pfs), each PF's VFs (its RV(vfs)), by PF address.
  returned: with O(pfs)
  type: dict
  sample: {"0000:41:00.0": [{index: 0, address: "0000:41:00.1"}]}
vf_settings_skipped:
  description: With O(pfs), the entries of O(vf_settings) not applied, each with its reason.
  returned: with O(pfs)
  type: list
  elements: dict
  sample: [{address: "0000:c1:00.2", reason: "PF 0000:c1:00.0 has no netdev: VF MAC/VLAN go through it"}]
pf:
  description: PCI address of the PF.
  returned: with O(pf)
  type: str
  sample: "0000:81:00.0"
netdev:
  description: The PF's netdev, null when it has none.
  returned: with O(pf)
  type: str
  sample: ens1f0np0
sriov_totalvfs:
  description: Most VFs the PF offers.
  returned: with O(pf)
  type: int
  sample: 4
num_vfs:
  description: VF count after the change (predicted in check mode).
  returned: with O(pf)
  type: int
  sample: 4
num_vfs_before:
  description: VF count before the change.
  returned: with O(pf)
  type: int
  sample: 2
recreated:
  description: Whether the VFs were removed (through 0) and created again.
  returned: with O(pf)
  type: bool
  sample: false
autoprobe:
  description: C(sriov_drivers_autoprobe) after the change.
  returned: with O(pf)
  type: bool
  sample: false
pf_link_up:
  description: Whether the PF's netdev is administratively up after the change; null when it has no netdev.
  returned: with O(pf)
  type: bool
  sample: true
vfs:
  description: Each VF after the change.
  returned: with O(pf)
  type: list
  elements: dict
  contains:
    index:
      description: VF index.
      type: int
      sample: 0
    address:
      description: PCI address (predicted from sriov_offset/stride in check mode).
      type: str
      sample: "0000:81:00.2"
    numa_node:
      description: NUMA node.
      type: int
      sample: 1
    iommu_group:
      description: IOMMU group number.
      type: int
      sample: 52
    driver:
      description: Bound driver, null when driverless.
      type: str
      sample: "vfio-pci"
    netdev:
      description: The VF's own netdev, if a host driver made one.
      type: str
      sample: "ens81f0v0"
    settings:
      description: MAC, VLAN, QoS, spoof check, trust and link state (only for PFs with a netdev).
      type: dict
      sample: {"mac": "52:54:00:6b:00:01", "vlan": 100, "qos": 0, "spoofchk": true, "trust": false, "link_state": "auto"}
  sample:
    - {index: 0, address: "0000:81:00.1", numa_node: 1, iommu_group: 14, driver: null, netdev: null, settings: null}
isolation:
  description: Whether the VFs can go to different tenants; not viable when they share IOMMU groups.
  returned: with O(pf)
  type: dict
  sample: {viable: false, groups: {"0000:01:00.2": 1}, reasons: ["0000:01:00.2 shares IOMMU group 1 with 0000:01:00.0"]}
settings_not_read:
  description:
    - Why the VFs' current settings were not read, or null when they were (or there was nothing to read). Under a captured
      tree (O(root) other than V(/), a preview) C(ip) is not asked, neither the host's nor the controller's, so every setting
      asked is shown as to be set; outside check mode such a call is refused, as the settings go through the running host.
  returned: with O(pf)
  type: str
  sample: null
persisted_files:
  description: Boot files written (would be written in check mode).
  returned: with O(pf)
  type: list
  elements: str
  sample: [/etc/gpuvirt/sriov.json]
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov

MODULE_ARGS = sriov.MODULE_ARGS


def main(host=None):
    run_module(MODULE_ARGS, sriov.sriov_vfs, host=host)


if __name__ == "__main__":
    main()
