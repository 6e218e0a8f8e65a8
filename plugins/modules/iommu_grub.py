#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: iommu_grub
short_description: Kernel command line for device passthrough, in the GRUB defaults file
description:
  - Turns the IOMMU on in passthrough mode, pre-binds devices to C(pci-stub) or C(vfio-pci) from
    boot, and sets or removes any other kernel argument, by editing one variable of the GRUB
    defaults file (C(GRUB_CMDLINE_LINUX) by default) and regenerating the boot menu.
  - Only the bytes of that variable's value change; comments, other variables, quoting style and
    the trailing newline stay as they were. The file is written atomically.
  - Refuses, and changes nothing, when the file cannot be edited safely; unbalanced quotes, the
    variable set twice, a value built from shell expansion, an assignment inside a compound
    command, a drop-in file (C(<grub_file>.d/*.cfg)) that sets the variable again, or args in the
    other cmdline variable that contradict the ones asked here (that variable read as the shell leaves it after the file
    and then each drop-in, appends to itself included), or that other variable built from any other shell expansion, in
    the file or a drop-in (its args cannot be checked; the refusal names the file and line).
  - An arg the other cmdline variable already gives with the same value counts as present and is not added again
    (RV(args_in_other_variable)).
  - Compares the wanted args with the running kernel's C(/proc/cmdline) and says whether a reboot
    is needed; it never reboots.
  - One call at a time per O(root) (an exclusive lock on the root directory, shared with M(gpuvirt.tenancy.hugepages));
    a second call waits and decides from what the first wrote; one that waits more than 300 seconds fails, changing nothing.
  - With O(early_driver), also makes sure the pre-bind driver runs before the devices' own drivers
    at the next boot (files in C(/etc/modules-load.d), C(/etc/modprobe.d) and, when asked, the
    initramfs configuration) and says whether it runs now, so that one call decides everything
    the next boot needs.
version_added: 0.1.0
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
requirements:
  - C(update-grub) (Debian, Ubuntu), or C(grubby) or C(grub2-mkconfig) (RHEL family) on the managed host
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.bootloader
attributes:
  diff_mode:
    details:
      - The diff is the GRUB defaults file before and after, and each file of O(early_driver) that changes.
options:
  iommu:
    description:
      - Whether the IOMMU is on.
      - Intel gets C(intel_iommu=on) (replacing C(intel_iommu=off), other C(intel_iommu) options kept).
        AMD has its IOMMU on by default, so only a conflicting C(amd_iommu=off) is removed.
      - C(false) gives C(intel_iommu=off) or C(amd_iommu=off).
    type: bool
    default: true
  vendor:
    description:
      - CPU vendor, which decides the IOMMU argument. V(auto) reads C(vendor_id) in C(/proc/cpuinfo).
    type: str
    choices: [auto, intel, amd]
    default: auto
  passthrough:
    description:
      - Whether the IOMMU runs in passthrough mode for the host's own devices (C(iommu=pt)); C(false)
        removes C(pt) from C(iommu=).
      - Defaults to the value of O(iommu).
    type: bool
  pre_bind_ids:
    description:
      - C(vendor:device) ids (as C(lspci -nn) prints them) of devices to hold from boot, so that no
        host driver grabs or resets them. Each id may carry a C(0x) prefix, as C(gpu_ids) may
        (C(0x10de:0x20b5) is C(10de:20b5)); the argument is written without it.
      - Merged with the ids already in the argument (order kept, new ids appended); the same ids
        leave the other driver's C(.ids) argument.
    type: list
    elements: str
    default: []
  pre_bind_driver:
    description:
      - Driver that holds O(pre_bind_ids) from boot; C(pci-stub.ids=) or C(vfio-pci.ids=).
      - The driver must be built into the kernel or loaded early (initramfs) to claim the devices
        before their own driver does.
    type: str
    choices: [pci-stub, vfio-pci]
    default: pci-stub
  args:
    description:
      - Any other kernel argument. V(present) sets C(name=value) once (in place of other values
        of C(name)); V(absent) removes C(name=value), or every C(name) when there is no value.
      - A C(hugepages) item right after a C(hugepagesz) item is that page size's boot-time
        reservation, as the kernel reads them (C(hugepagesz=1G hugepages=4)).
      - The names C(intel_iommu), C(amd_iommu), C(iommu), C(pci-stub.ids) and C(vfio-pci.ids)
        belong to the options above. The same argument both present and absent is an error.
      - Values may hold letters, digits and C(._,:/+@%=~!^-) only (nothing /bin/sh or GRUB would interpret).
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: Argument name, such as C(hugepagesz) or C(quiet).
        type: str
        required: true
      value:
        description: Argument value; none for a flag such as C(quiet).
        type: str
      state:
        description: Whether the argument is on the command line.
        type: str
        choices: [present, absent]
        default: present
  backup:
    description:
      - Keep a copy of the file, named with a timestamp, before changing it.
      - A copy of the same second is never overwritten; the new copy gets a counter (C(grub.2026-11-29@17:30:00.1~)).
    type: bool
    default: false
  hugepages:
    description:
      - Hugepages per NUMA node in the same call, as M(gpuvirt.tenancy.hugepages) does them (its options,
        validated as that module validates them), without its GRUB options (C(boot_config), C(grub_file),
        C(variable), C(bootloader_update)) - the boot-time sizes (the C(boot_args) of RV(hugepages)) go after O(args)
        into this module's one GRUB edit.
      - The pages are set (and a shortfall fails the call) before any boot file is written; every input of
        both is checked before anything changes.
      - Omitted, no hugepages are read or set (M(gpuvirt.tenancy.hugepages) alone does the same in a call
        of its own).
    type: dict
  early_driver:
    description:
      - The stub driver that must hold the pre-bound devices from boot (usually O(pre_bind_driver)).
        Built into the running kernel (listed in C(/lib/modules/RELEASE/modules.builtin)) it needs nothing.
        As a module it is loaded at every boot by C(/etc/modules-load.d/gpuvirt-prebind.conf), before the
        drivers of O(early_driver.softdep_for) by C(/etc/modprobe.d/gpuvirt-prebind.conf), and with
        O(early_driver.initramfs=true) from the initramfs.
      - Whether it runs now is read from C(/sys/module/NAME); RV(early_driver.reboot_required) is true while
        it does not.
      - Files are written whole and atomically, only when their text differs; existing files are not removed
        when the driver is built in.
      - Omitted, nothing of this is read or written.
    type: dict
    suboptions:
      name:
        description: Kernel module name of the driver, such as V(pci-stub) or V(vfio-pci).
        type: str
        required: true
      softdep_for:
        description:
          - "Drivers that load only after O(early_driver.name) (one C(softdep DRIVER pre: NAME) line each)."
          - Empty, no softdep file is written.
        type: list
        elements: str
        default: []
      initramfs:
        description:
          - Ask for the driver in the initramfs too, with the tool of the host's family (from C(/etc/os-release)).
          - On the Debian family (initramfs-tools) the line C(NAME) in C(/etc/initramfs-tools/modules), added when missing;
            on the RHEL family (dracut) C(/etc/dracut.conf.d/gpuvirt-prebind.conf) holding C(force_drivers+=" NAME ").
          - The initramfs itself is not rebuilt here; RV(early_driver.files) tells which files changed, so the
            caller rebuilds it once.
        type: bool
        default: false
  gpu_stack:
    description:
      - The NVIDIA host stack kept off the tenants' GPUs, decided here on the host from the host model (read with the
        topology reader). With NVIDIA GPUs going to tenants, nouveau (and, when no GPU stays with the host, the nvidia
        modules) blacklisted in C(/etc/modprobe.d/gpuvirt-nvidia-host.conf) and on the command line in this call's GRUB
        edit (C(modprobe.blacklist=), on RHEL-family hosts also C(rd.driver.blacklist=)), the host daemons
        (nvidia-persistenced, nvidia-fabricmanager, DCGM) stopped and disabled, ids of host GPUs dropped from
        O(pre_bind_ids), the early stub driver (as O(early_driver)) when devices are pre-bound, and the running kernel's
        initramfs rebuilt when the module configuration it carries changed.
      - The initramfs is read only on the running host (O(root) V(/)); RV(initramfs) says so. The daemons' state is asked
        of systemctl on the running host; under a captured O(root) it is read from the capture's
        C(.capture/systemctl-show-nvidia.txt) (playbooks/files/capture_host.py writes it) and nothing is stopped there
        (RV(gpu_stack.daemons_read), RV(gpu_stack.daemons_source)).
    type: dict
    suboptions:
      tenant_gpus:
        description: PCI addresses of the tenants' GPUs; empty, every GPU O(gpu_stack.host_gpus) does not name.
        type: list
        elements: str
        default: []
      host_gpus:
        description: PCI addresses of GPUs the host keeps (their driver and daemons stay; only nouveau is blacklisted).
        type: list
        elements: str
        default: []
      gpu_ids:
        description: Extra C(vendor:device) ids read as GPUs in the host model.
        type: list
        elements: str
        default: []
      manage:
        description: Whether to keep the NVIDIA host stack off the tenants' GPUs at all.
        type: bool
        default: true
      early_driver:
        description: Load the pre-bind driver early when devices are pre-bound (as O(early_driver), unless that is given).
        type: bool
        default: true
      early_driver_before:
        description: Drivers that load only after the pre-bind driver.
        type: list
        elements: str
        default: [nouveau, nvidia, nvidiafb]
      initramfs:
        description: Put the pre-bind driver into the initramfs and rebuild the image when what it carries changed.
        type: bool
        default: true
  firmware:
    description:
      - The ConnectX firmware for SR-IOV, decided here on the host. For each ConnectX PF of O(firmware.sriov_pfs) that
        wants VFs, C(SRIOV_EN) on and C(NUM_OF_VFS) at least the VFs wanted, set with C(mlxconfig) or C(mstconfig) for
        the next firmware load, and on VPI cards the link type its entry's C(link_type) says (V(eth) sets C(LINK_TYPE_P1/P2)
        C(ETH); V(keep); V(ib) is refused, IB SR-IOV GUIDs are not set by this collection). A VPI card whose ports are not
        Ethernet is refused until C(link_type) is given.
      - With O(firmware.reset_ok), loads what is pending with a firmware reset (C(mlxfwreset)/C(mstfwreset), once per card)
        after the GRUB edit; what a reset does not load needs a cold boot (RV(cold_boot_required)).
      - Read only on the running host (O(root) V(/)); under a capture RV(firmware) says it was not read.
    type: dict
    suboptions:
      sriov_pfs:
        description: The wanted VFs as the inventory says them, C([{pf, num_vfs, link_type}]) (C(gpuvirt_sriov_pfs)).
        type: list
        elements: dict
        default: []
      ats_pfs:
        description:
          - PFs of O(firmware.sriov_pfs) whose VFs go to GPU tenants - C(ATS_ENABLED=True) is set in their firmware with the
            SR-IOV settings and loaded with them (PCIe ATS, which GPUDirect RDMA inside a VM needs; NVIDIA AI Enterprise,
            "Optimizing VM Configuration for AI Inference", appendix "ATS and ACS configuration").
          - A PF whose firmware has no C(ATS_ENABLED) fails, naming it, before anything is set.
        type: list
        elements: str
        default: []
      nic_ids:
        description: Extra C(vendor:device) ids read as NICs in the host model.
        type: list
        elements: str
        default: []
      install:
        description: Install mstflint (apt-get, dnf or yum) where neither C(mlxconfig) nor C(mstconfig) is, then set.
        type: bool
        default: false
      reset:
        description: Whether firmware resets are allowed at all (V(false) leaves what is pending to a cold boot).
        type: bool
        default: true
      reset_level:
        description: The reset level (3 driver restart and PCI reset, 4 warm reboot).
        type: int
        choices: [0, 3, 4]
        default: 3
      reset_ok:
        description: Run the reset in this call (the caller may restart the card's driver now).
        type: bool
        default: false
  acs:
    description:
      - ACS per path, for fast tenants (opt-in) - the ACS settings of the PCIe bridges on each tenant GPU's path to its
        nearest PF among O(acs.pfs) (the pairs the placement planner makes), set at boot by the kernel's
        C(pci=config_acs=FLAGS@BRIDGE) (Linux 6.11 and later), never on bridges off those paths.
      - The argument is written when the running kernel takes it - one bridge from Linux 6.11, several bridges (one
        C(;)-separated list) from Linux 6.15. A list goes into O(variable) in GRUB's single quotes
        (C('pci=config_acs=F@A;F@B')), because GRUB's script language reads an unquoted C(;) as the end of the command;
        GRUB takes the quotes off, so the kernel gets the list whole, and the file's quoted word and the kernel's
        unquoted argument count as the same argument in every comparison. On RHEL-family hosts (grubby, BLS entries) a
        list is not written. Where it is not written RV(acs) says the argument and what to do, and a warning says it.
      - With no bridge on the tenants' paths, a C(pci=config_acs=) argument on the command line goes.
      - Flags that turn off Source Validation, Request or Completion Redirect or Upstream Forwarding on a path bridge
        would merge IOMMU groups across tenants - refused.
    type: dict
    suboptions:
      gpus:
        description: The tenants' GPUs (PCI addresses); empty - the tenant GPUs of O(gpu_stack), else every GPU.
        type: list
        elements: str
        default: []
      pfs:
        description: The PFs whose VFs go to GPU tenants; empty - the ConnectX PFs of O(firmware.sriov_pfs).
        type: list
        elements: str
        default: []
      flags:
        description:
          - The C(config_acs) flags, bit 6 first - C(0) force disabled, C(1) force enabled, C(x) unchanged. The default
            turns Direct Translated P2P on and Translation Blocking off, so ATS-translated requests go directly through
            the switch, and leaves the rest to the kernel.
        type: str
        default: 1xxxx0x
notes:
  - The new command line takes effect at the next boot; O(ignore:reboot_required) says when one is due.
    The P(gpuvirt.tenancy.host_boot#role) role does the single reboot.
seealso:
  - module: gpuvirt.tenancy.hugepages
"""

EXAMPLES = r"""
- name: IOMMU on in passthrough mode, GPUs held by pci-stub from boot
  gpuvirt.tenancy.iommu_grub:
    pre_bind_ids:
      - 10de:20b5
      - 10de:2331
  register: boot_args

- name: Same, and 1G hugepages reserved at boot on both NUMA nodes, in the same edit
  gpuvirt.tenancy.iommu_grub:
    vendor: intel
    pre_bind_ids: [10de:2330]
    pre_bind_driver: vfio-pci
    args:
      - name: default_hugepagesz
        value: 1G
      - name: hugepagesz
        value: 1G
      - name: hugepages
        value: "0:8,1:8"
      - name: quiet
        state: absent

- name: Same, and pci-stub loaded early when it is a module (before nouveau and nvidia, from the initramfs)
  gpuvirt.tenancy.iommu_grub:
    pre_bind_ids: [10de:2330]
    early_driver:
      name: pci-stub
      softdep_for: [nouveau, nvidia]
      initramfs: true
  register: boot_args

- name: The whole boot configuration in one call - hugepages now and at boot, IOMMU, pre-binding
  gpuvirt.tenancy.iommu_grub:
    pre_bind_ids: [10de:2330]
    hugepages:
      pages:
        - {size: 1G, count: 64, node: all}
        - {size: 2M, count: 4096, node: 0}
      at_boot: [1G]
      persist: true
      mounts:
        - {size: 1G, path: /dev/hugepages1G}
  register: boot_args

- name: Reboot when the command line or the early driver asks for it
  ansible.builtin.reboot:
  when: boot_args.reboot_required or boot_args.early_driver.reboot_required

- name: Review a change on a copy, without root and without touching the boot menu
  gpuvirt.tenancy.iommu_grub:
    grub_file: /tmp/grub.copy
    bootloader_update: none
  check_mode: true
  diff: true
"""

RETURN = r"""
gpu_stack:
  description: What O(gpu_stack) decided (null without it).
  returned: always
  type: dict
  sample: {active: true, tenant_gpus: ["0000:07:00.0"], host_gpus: [], pre_bind_ids: ["10de:20b0"], address_prebind: [],
           blacklist: [nouveau, nvidia], kernel_args: [{name: modprobe.blacklist, value: "nouveau,nvidia", state: present}],
           os_family: Debian, modprobe_file: /etc/modprobe.d/gpuvirt-nvidia-host.conf, modprobe_changed: true,
           daemons_stopped: [nvidia-persistenced.service], daemons_read: true, daemons_source: null, notes: [], changed: true}
  contains:
    daemons_read:
      description: Whether the NVIDIA daemons' state was read (on the running host, or from a capture).
      type: bool
    daemons_source:
      description: The capture's file the daemons' state came from (null on the running host, or when not read).
      type: str
initramfs:
  description: Whether the running kernel's initramfs was (in check mode, would be) rebuilt, and why (null when not asked).
  returned: always
  type: dict
  sample: {read: true, rebuild: true, reasons: ["/etc/modprobe.d/gpuvirt-nvidia-host.conf changed"],
           command: [update-initramfs, -u, -k, 5.15.0-91-generic]}
firmware:
  description:
    - What O(firmware) found and set (null without it), per PF C(changes) and C(link_type_changes), and the outcome
      C(pending) (not yet loaded), C(cold_boot) (only a power cycle loads it), C(reset) (loaded by a reset),
      C(reset_devices), C(messages).
  returned: always
  type: dict
  sample: {targets: ["0000:19:00.0"], tool: /usr/bin/mlxconfig, read: true,
           changes: {"0000:19:00.0": {SRIOV_EN: "True", NUM_OF_VFS: "8"}}, link_type_changes: {}, pending: [],
           cold_boot: [], reset: ["0000:19:00.0"], reset_devices: [], messages: [], changed: true}
acs:
  description:
    - What O(acs) decided (null without it) - the C(flags), the C(paths) (C(gpu), C(pf), their C(bridges)), all
      C(bridges), the kernel argument C(arg) they need, whether it was C(written) to the command line, the running
      C(kernel) release and C(notes) (what to do where it is not written).
  returned: always
  type: dict
  sample: {flags: 1xxxx0x, bridges: ["0000:12:00.0", "0000:16:00.0"], written: true, kernel: 6.15.0-1-amd64,
           arg: "pci=config_acs=1xxxx0x@0000:12:00.0;1xxxx0x@0000:16:00.0", notes: [],
           paths: [{gpu: "0000:15:00.0", pf: "0000:19:00.0", bridges: ["0000:12:00.0", "0000:16:00.0"]}]}
firmware_pending:
  description: ConnectX PFs whose firmware settings are not loaded yet.
  returned: always
  type: list
  elements: str
  sample: []
cold_boot_required:
  description: ConnectX PFs whose settings only a cold boot (power off, then on) loads.
  returned: always
  type: list
  elements: str
  sample: []
pending:
  description: What this boot still waits for, in words (the command line, the early driver, a firmware reset or cold boot).
  returned: always
  type: list
  elements: str
  sample: ["the kernel command line (+intel_iommu=on +iommu=pt)"]
elapsed_s:
  description:
    - Seconds each long step of this call took, for those that ran (never in check mode) - C(initramfs) (the rebuild),
      C(firmware_install) (the package), C(firmware_reset) (the resets of all cards together).
    - The call shows no progress while it runs; the boot stage prints these after it (docs/boot.md).
  returned: when a long step ran
  type: dict
  sample: {initramfs: 48.3, firmware_reset: 95.1}
cmdline:
  description: The value the variable has after the edit (the args it wants).
  returned: always
  type: str
  sample: "intel_iommu=on iommu=pt pci-stub.ids=1234:11e8"
args:
  description:
    - O(ignore:cmdline) split into its words, as the file holds them - an argument GRUB must read in single quotes (a
      C(pci=config_acs=) list) with its quotes; RV(args_missing) and RV(args_unwanted) name the arguments as the
      kernel gets them, without GRUB's quotes.
  returned: always
  type: list
  elements: str
  sample: ["intel_iommu=on", "iommu=pt", "pci-stub.ids=1234:11e8"]
args_in_other_variable:
  description:
    - Wanted args left out of the edited variable because the other cmdline variable (C(GRUB_CMDLINE_LINUX) or
      C(GRUB_CMDLINE_LINUX_DEFAULT)) already gives them with the same value; the kernel reads both, so they count as
      present and are not said twice.
  returned: always
  type: list
  elements: str
  sample: ["intel_iommu=on", "iommu=pt"]
running_cmdline:
  description: The running kernel's command line (C(/proc/cmdline)).
  returned: always
  type: str
  sample: "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=UUID=3a99c6a2 ro intel_iommu=off quiet"
reboot_required:
  description:
    - Whether the running kernel lacks a wanted arg or has an unwanted one, or the early stub driver does not run yet;
      true again on a re-run before the reboot, false once the host runs with the new args.
  returned: always
  type: bool
  sample: true
args_missing:
  description: Args the running kernel's command line lacks.
  returned: always
  type: list
  elements: str
  sample: ["intel_iommu=on", "iommu=pt"]
args_unwanted:
  description: Args of the running kernel's command line that the edit removes or replaces.
  returned: always
  type: list
  elements: str
  sample: ["intel_iommu=off"]
vendor:
  description: The CPU vendor used.
  returned: always
  type: str
  sample: intel
bootloader_commands:
  description: Commands run (or, in check mode, to run) to regenerate the boot menu.
  returned: always
  type: list
  elements: list
  sample: [["/usr/sbin/update-grub"]]
backup_file:
  description: The copy made before the change, with O(backup=true).
  returned: always
  type: str
  sample: /etc/default/grub.2026-11-29@17:30:00~
hugepages:
  description:
    - With O(hugepages), the result of M(gpuvirt.tenancy.hugepages) for them (its C(boot_args) are in
      RV(args) and the GRUB edit); null without it.
  returned: always
  type: dict
  sample: {changed: false, boot_args: [], pages: [{size: 2M, node: 0, requested: 512, allocated: 512}]}
early_driver:
  description: What O(early_driver) found and did; null without it.
  returned: always
  type: dict
  contains:
    name:
      description: The driver.
      type: str
      sample: pci-stub
    builtin:
      description: Whether the running kernel has it built in (then no file is written).
      type: bool
      sample: false
    loaded:
      description: Whether it runs now (C(/sys/module/NAME) exists).
      type: bool
      sample: true
    reboot_required:
      description: Whether a reboot is due for it to hold the devices (it does not run now).
      type: bool
      sample: false
    in_initramfs:
      description: Whether the initramfs must carry the driver (a module, with O(early_driver.initramfs=true)).
      type: bool
      sample: false
    initramfs_tool:
      description: V(initramfs-tools), V(dracut), or null (not asked, or a family without either).
      type: str
      sample: initramfs-tools
    files:
      description:
        - The files it manages on this host, each with whether this run changed it (in check mode, would change it).
          Empty when the driver is built in.
      type: dict
      sample: {"/etc/modules-load.d/gpuvirt-prebind.conf": {"changed": false},
               "/etc/modprobe.d/gpuvirt-prebind.conf": {"changed": true}}
    changed:
      description: Whether one of those files changed.
      type: bool
      sample: true
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub import IOMMU_GRUB_ARGS, iommu_grub

MODULE_ARGS = IOMMU_GRUB_ARGS


def main(host=None):
    run_module(MODULE_ARGS, iommu_grub, host=host)


if __name__ == "__main__":
    main()
