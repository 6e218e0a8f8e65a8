#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tenant_domain
short_description: Define, resize, prioritise, start or remove tenants' libvirt domains with their GPUs and VFs passed through
version_added: 0.1.0
description:
  - Defines a libvirt domain for one tenant (O(name)), or for each of a list of tenants (O(domains)), through
    libvirt-python; passes the GPUs and VFs through as PCI hostdevs (C(managed=no), the devices stay bound to
    vfio-pci by the host, see M(gpuvirt.tenancy.vfio_bind)); a VF that is a network function is passed as an
    C(interface type=hostdev) carrying O(mac) and O(vlan); file disks are virtio with C(io=threads).
  - When the domain exists, only what differs is changed (domain type, vCPU count, memory, hugepage backing, the PCI hostdevs,
    hostdev interfaces and file disks); every other element, including the guest PCI addresses libvirt assigned, is kept.
    Defining twice changes nothing.
  - With O(live=true) a running domain also gets, live, a new vCPU count within its maximum (C(virDomainSetVcpusFlags)), new
    CPU shares and quota (C(virDomainSetSchedulerParametersFlags)) and new disk I/O limits (C(virDomainSetBlockIoTune)). What
    cannot change live (memory, devices, hugepage backing, a vCPU count above the running maximum) is written to the definition
    and reported with RV(restart_required) and a warning; the domain is never restarted by this module.
  - O(state=absent) shuts the domain down (ACPI power button), waits up to O(shutdown_timeout) seconds, powers it off only with
    O(force_off=true), then undefines it. Its devices are not touched, so GPUs and VFs stay bound to vfio-pci for the next tenant
    (RV(released_devices) lists them).
  - A domain whose state is V(running) starts when the host boots (libvirt's autostart flag), so that running tenants come
    back after a reboot; a V(defined) one does not (O(autostart) says otherwise).
  - With O(domains), every domain is handled in one call over one libvirt connection (one round trip for all tenants of a host).
    Every entry is checked first (its options as at the top level, its size and pins against the host), so that a bad entry
    fails the call before any domain changes; then each is decided and acted on in list order, so that a removal earlier in
    the list frees the devices a later entry takes.
  - The isolation rules hold before anything changes, between the entries of a call and against the other domains on the
    connection as each entry finds them. A PCI device goes to one domain; the devices of one IOMMU group go to one tenant or
    to none; a PF and its VFs are never split (between tenants, nor a PF to a tenant while its VFs stay with the host); a VF
    MAC is on one interface. A conflict with another domain is a warning in check mode (a removal earlier in the run may free
    it), an error otherwise. A domain whose stored definition does not parse as XML is an error naming it.
  - With O(vcpu_pins), O(emulator_cpus) or O(nodeset) the same call pins the domain as M(gpuvirt.tenancy.numa_pin) does, in the
    definition it writes (so one call defines, pins and starts a tenant; the pins are checked against the host's CPUs and the vCPUs
    of the new definition), and with O(live=true) on the running domain too, after a live vCPU change. Left out, the domain's
    pins are left as they are.
  - With O(image), the tenant boots a cloud image - its disk, made on the host as a copy-on-write qcow2 overlay on the base image
    (or a full copy), is the first disk (virtio, C(io=threads)); with O(cloud_init) it also gets a NoCloud seed (an ISO labelled
    C(cidata)) as a read-only cdrom; with O(management) a virtio NIC on a libvirt network or a host bridge. Every tenant's
    image is checked (the base exists, its checksum, the disk not smaller than its virtual size) before any file, VF or domain
    changes; O(state=absent) deletes the files this module made for the tenant (and nothing else) after undefining it.
  - With O(sriov_vfs), the same call first gives the tenants' network VFs their settings (MAC, VLAN, spoof check, trust) as
    M(gpuvirt.tenancy.sriov_vfs) does, before any domain is defined or started, so that the VFs and the domains of a host are
    one round trip.
  - With O(tenants), the call is the tenants stage decided on the host from its desired state as the inventory gives it - it
    reads the host model (O(gpu_ids), O(nic_ids); with O(preview), as the earlier stages will leave it) and every domain on
    the connection, plans the tenants with the planner the C(gpuvirt.tenancy.plan_tenants) filter runs (defined tenants keep
    their place, the domains that are not listed tenants keep what they hold and are never reused nor removed), then removes
    the tenants the plan released, clears the VFs they held and sets the placed tenants' network VFs (MAC, VLAN, spoof
    checking on, trust off) as O(sriov_vfs) does, and defines, pins, sets to autostart and starts each placed tenant as
    O(domains) does. Every entry and VF setting is checked before anything changes. It returns the plan (RV(plan),
    RV(placements), RV(notes), RV(foreign), RV(unplaced)) with what was done; a tenant that does not fit is in RV(unplaced),
    not a failure.
options:
  name:
    description: The domain name (for a tenant, the tenant name). Required unless O(domains) or O(tenants) is given.
    type: str
  tenants:
    description:
      - The tenants as the inventory gives them (C(gpuvirt_tenants), docs/tenants.md) - each a dict with C(name) (required,
        unique), C(vcpus), C(max_vcpus), C(memory_mb), C(gpus) (a count or addresses), C(vfs), C(hugepage_size), C(mac),
        C(vlan), C(state) (V(defined), V(running) or V(absent)), C(autostart), C(priority), C(qos), C(disks), C(domain_type),
        C(machine), C(firmware), C(emulator), C(shutdown_timeout), C(force_off), C(image) and C(guest). The call plans them on
        the host and acts on the plan (see the description).
      - >-
        Mutually exclusive with O(domains), O(sriov_vfs), O(name) and every option of one domain except O(domain_type),
        O(machine), O(firmware), O(memory_mode), O(live), O(shutdown_timeout) and O(force_off), which are then every
        tenant's settings (a tenant's own C(domain_type), C(machine), C(firmware), C(shutdown_timeout) and C(force_off)
        win). A tenant without a name, or a name listed twice, is refused naming its index; the planner refuses a bad
        tenant naming it; nothing changes then.
    type: list
    elements: dict
  policy:
    description:
      - With O(tenants), the planner policy - C(numa), C(reserved_cpus), C(smt), C(emulator), C(pcie_affinity),
        C(hugepage_size), C(host_devices), C(strategy), C(gpus) (the GPUs given to tenants; left out, every GPU of the host
        model), C(vf_pfs) (the PFs whose VFs are; left out, every PF with VFs) and C(gpu_modules) (on an HGX board with
        NVSwitches, each GPU's module ID by its PCI address - a tenant's GPUs are then one Fabric Manager partition).
        C(existing) is not given - the domains are read on the host.
    type: dict
  priorities:
    description:
      - With O(tenants), each priority class's QoS (O(qos)), merged under a tenant's own C(qos). Default C(online) with
        CPU shares 1024 and C(batch) with shares 256 and a 50% quota per vCPU.
    type: dict
  guest_access:
    description:
      - With O(tenants), how the tenants' guests boot and are reached (C(gpuvirt_guest_access), docs/tenants.md) - C(user),
        C(ssh_authorized_keys), C(packages), C(management) (the NIC's C(network) or C(bridge), C(gateway), C(dns)),
        C(guest_dir), and C(management_network) (as O(management_network), which wins when given). A tenant with an
        C(image) gets O(image), O(cloud_init) and, with a C(guest.address), O(management); a tenant's own C(data_nic)
        is its O(data_nic).
      - C(packages) go into the seed only when listed (default none); each listed package costs the guest's first boot
        an C(apt-get update), which fails where the guest has no way to a package mirror. The guest stage installs the
        RDMA userspace it finds missing.
    type: dict
  vf_persist:
    description: With O(tenants), keep the VF settings (and the cleared ones) in the boot-time SR-IOV configuration. Default V(true).
    type: bool
  gpu_ids:
    description: With O(tenants), the PCI IDs (C(vendor:device)) that classify the host model's GPUs, as M(gpuvirt.tenancy.host_topology_info) takes them.
    type: list
    elements: str
  nic_ids:
    description: With O(tenants), the PCI IDs that classify the host model's NICs.
    type: list
    elements: str
  fabric_manager:
    description:
      - With O(tenants), on an HGX board with NVSwitches (the Shared NVSwitch virtualization model of NVIDIA's Fabric Manager
        user guide), where the Fabric Manager is reached through NVIDIA's C(fmpm) (U(https://github.com/NVIDIA/Fabric-Manager-Client)),
        as M(gpuvirt.tenancy.fabric_partition) reaches it. Given, the call reads C(fmpm -l) before anything changes (in check
        mode too) and takes each tenant's Fabric Manager partition (the plan's C(nvswitch_partition)) with it - a starting
        tenant's partition is activated between its definition and its start (C(fmpm -a ID)), a removed tenant's deactivated
        after its removal (C(fmpm -d ID)). A partition the Fabric Manager does not list, one it lists with other GPUs than the
        plan's, one whose GPUs another active partition holds (unless a removal of the same call frees it), or a tenant whose
        partition the plan does not know (no C(policy.gpu_modules)) is refused before any change, naming the tenant. A
        running tenant keeps what it has (its partition is never activated under a running guest; a warning says when it
        is not active). A preview reads no Fabric Manager and shows the steps the plan asks for (RV(fabric_partitions)).
      - Given, a tenant with a partition gets libvirt's autostart off, since at the host's boot nothing could activate its
        partition before libvirt starts it (the next run of the stage activates and starts it); a tenant asking
        C(autostart=true) is refused, naming it.
      - Left out, nothing asks the Fabric Manager; the preflight report says which partition each tenant needs.
    type: dict
    suboptions:
      fmpm:
        description: The fmpm program; found on PATH when not given.
        type: path
      hostname:
        description: The Fabric Manager's address (the service VM's), passed as C(--hostname); fmpm's default is 127.0.0.1.
        type: str
  fabric_vm:
    description:
      - With O(tenants), the Fabric Manager service VM of an HGX board with NVSwitches (the Shared NVSwitch virtualization
        model, docs/tenants.md) - C(name), C(vcpus), C(memory_mb), C(image) (as a tenant's; it must carry the NVIDIA driver
        and C(nvidia-fabricmanager), nothing is installed) and C(address) (its management address with prefix, the Fabric
        Manager's C(FM_CMD_BIND_INTERFACE) that C(fmpm --hostname) reaches), all required; C(nvswitches) (PCI addresses;
        default every NVSwitch of the host model, an NVIDIA function of PCI class 0x0680), C(management_mac),
        C(hostname), and as a tenant's C(hugepage_size), C(firmware), C(machine), C(numa), C(emulator), C(autostart),
        C(disks).
      - It is planned as a tenant without GPUs or VFs (its vCPUs pinned and its memory placed, so that no tenant takes
        them), defined and started with its NVSwitches as its only PCI host devices and a seed with
        O(cloud_init.fabric_manager_address). Refused before any change on a host without NVSwitches, for an NVSwitch
        whose IOMMU group holds anything but NVSwitches and bridges, for a name a tenant has, and for an address another
        guest has. Its management NIC is O(guest_access)'s C(management).
    type: dict
  preview:
    description:
      - With O(tenants), a preview (O(root) a captured host tree, O(uri) libvirt's test driver, check mode, docs/preview.md) -
        the plan is made on the host as the boot and SR-IOV/VFIO stages will leave it (the wanted VFs and hugepages, the
        tenants' GPUs on vfio-pci; said in RV(preview_notes)); the tenants' images and seeds are left out (not in the
        capture) and the VF settings are not asked of the PFs, only returned (RV(vf_settings)).
    type: dict
    suboptions:
      sriov_pfs:
        description: The PFs' wanted VFs (C(gpuvirt_sriov_pfs), C([{pf, num_vfs}])).
        type: list
        elements: dict
        default: []
      hugepages:
        description: The wanted hugepages (C(gpuvirt_hugepages), C([{size, count, node}])).
        type: list
        elements: dict
        default: []
      gpus:
        description: The tenants' GPUs (C(gpuvirt_gpus)), on vfio-pci after the VFIO stage.
        type: list
        elements: str
        default: []
  domains:
    description:
      - The domains to handle in one call, in order; each a dict of the options of one domain, the same as this module's top
        level (O(name), required, O(state), O(vcpus), O(max_vcpus), O(memory_mb), O(hugepage_size), O(gpus), O(vfs),
        O(network_vfs), O(mac), O(vlan), O(disks), O(qos), O(machine), O(arch), O(firmware), O(mmio_window_mb), O(domain_type),
        O(live), O(autostart), O(shutdown_timeout), O(force_off), O(relax_vf_isolation), O(vcpu_pins), O(emulator_cpus),
        O(memory_mode), O(nodeset), O(numa_cells), O(image), O(cloud_init), O(management), O(data_nic), O(guest_dir)),
        with the same defaults; O(root) and O(uri) are shared.
      - >-
        Mutually exclusive with O(name), O(tenants) and with every other option of one domain. A bad entry fails the call with an error
        naming its index, its name and the option (C(domains[1] (tenant-b): vcpus: must be at least 1)); a name listed twice
        is refused.
      - The results are in RV(domains), by name.
    type: list
    elements: dict
  sriov_vfs:
    description:
      - The options of M(gpuvirt.tenancy.sriov_vfs) (without O(gpuvirt.tenancy.sriov_vfs#module:root), which is this module's),
        for example O(gpuvirt.tenancy.sriov_vfs#module:pfs) with each PF's O(gpuvirt.tenancy.sriov_vfs#module:vfs) settings;
        validated as that module validates them, and run in this call after every domain entry and pin is checked and before
        any domain is defined or started (check mode and diff as for the domains).
      - Its result is RV(sriov_vfs); a failure there stops the call before any domain changes.
    type: dict
  state:
    description:
      - V(defined) defines the domain; V(running) also starts it when it is not running; V(absent) removes it (see
        O(shutdown_timeout), O(force_off)).
    type: str
    choices: [defined, running, absent]
    default: defined
  domain_type:
    description: libvirt domain type, V(kvm) or V(qemu) (no hardware virtualisation, as in the lab).
    type: str
    default: kvm
  vcpus:
    description: Number of vCPUs. Required unless O(state=absent). At most the host's CPUs.
    type: int
  max_vcpus:
    description:
      - Most vCPUs the domain may have; above O(vcpus) it leaves room to grow the running domain live (C(<vcpu current=...>)).
        Default O(vcpus). At most the host's CPUs.
    type: int
  memory_mb:
    description:
      - Guest memory in MiB (rounded up to whole hugepages when O(hugepage_size) is set). Required unless O(state=absent).
      - At most the host's memory (libvirt's capabilities, or the host model under O(root) in a preview).
    type: int
  hugepage_size:
    description: Back the memory with hugepages of this size (V(2M), V(1G)); V(none) or unset for none.
    type: str
  gpus:
    description: PCI addresses of the GPUs to pass through.
    type: list
    elements: str
    default: []
  vfs:
    description: PCI addresses of the VFs to pass through.
    type: list
    elements: str
    default: []
  network_vfs:
    description:
      - The VFs of O(vfs) that are network functions (their PF has a netdev), passed as C(interface type=hostdev) with a
        MAC and a VLAN, which libvirt sets on the PF when the domain starts. Each is a PCI address or a dict
        C({address, mac, vlan}) with the VF's own MAC and VLAN.
      - A VF without its own MAC gets O(mac) when it is the first one, else a locally administered unicast MAC derived from
        O(name) and the VF's index among O(vfs) in PCI address order (the same on every run and host; see
        C(docs/sriov_vfio.md)). A VF without its own VLAN gets O(vlan).
    type: list
    elements: raw
    default: []
  mac:
    description:
      - MAC address of the first network VF interface (the others get derived MACs unless given per VF). Unicast; the
        all-zero address is refused.
      - A MAC is one VF's - two interfaces of the call, or an interface of another domain, cannot share one.
    type: str
  vlan:
    description: VLAN tag of the network VF interfaces, 1-4094.
    type: int
  firmware:
    description:
      - Guest firmware of a new domain. V(efi) is UEFI (C(<os firmware='efi'>), libvirt picks OVMF from the firmware
        descriptors the C(ovmf) package installs; Secure Boot off), which large-BAR GPUs such as the A100 need; V(bios) is
        SeaBIOS.
      - Chosen when the domain is created; an existing domain keeps its firmware (a warning says so when it differs).
    type: str
    choices: [efi, bios]
    default: efi
  mmio_window_mb:
    description:
      - Size in MiB of OVMF's 64-bit PCI MMIO window (fw_cfg C(opt/ovmf/X-PciMmio64Mb), passed as QEMU
        C(-fw_cfg) through C(<qemu:commandline>), since libvirt refuses C(opt/ovmf/) names in C(<sysinfo type='fwcfg'>)),
        with O(firmware=efi).
      - Default, computed from the 64-bit prefetchable BARs in each passed device's sysfs C(resource) under O(root), is the
        smallest power of two at least their sum (each aligned to its size) plus 2 GiB, set only when larger than OVMF's
        32 GiB default. V(0) for no entry.
    type: int
  disks:
    description: File disks, virtio with C(io=threads) and C(cache=none).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Image path on the host.
        type: str
        required: true
      format:
        description: Image format.
        type: str
        default: qcow2
      target:
        description: Guest device name; default V(vda), V(vdb), ... in order.
        type: str
  machine:
    description: Machine type (for example V(q35) or V(pc-q35-8.2); letters, digits, C(.), C(_), C(-)); default the hypervisor's.
    type: str
  arch:
    description: Guest architecture.
    type: str
    default: x86_64
  qos:
    description:
      - CPU and disk QoS (C(cputune) C(shares), C(period), C(quota) and each file disk's C(iotune)). When given, the domain carries
        exactly these, and keys left out are removed (no cap). When omitted, the domain's QoS is left as it is.
    type: dict
    suboptions:
      cpu_shares:
        description: Relative CPU weight against other domains (libvirt C(shares), 2-262144).
        type: int
      cpu_period:
        description: Enforcement period of O(qos.cpu_quota), in microseconds (1000-1000000).
        type: int
      cpu_quota:
        description: CPU time each vCPU may use per O(qos.cpu_period), in microseconds; needs O(qos.cpu_period).
        type: int
      iotune:
        description: Disk limits for every disk of O(disks); 0 or left out means no limit.
        type: dict
        suboptions:
          total_bytes_sec:
            description: Bytes per second, reads and writes together.
            type: int
          read_bytes_sec:
            description: Read bytes per second.
            type: int
          write_bytes_sec:
            description: Written bytes per second.
            type: int
          total_iops_sec:
            description: I/O operations per second, reads and writes together.
            type: int
          read_iops_sec:
            description: Read operations per second.
            type: int
          write_iops_sec:
            description: Write operations per second.
            type: int
  live:
    description:
      - Also apply what can change live (vCPU count, CPU QoS, disk I/O limits, the vCPU and emulator pins and the NUMA nodeset) to
        a running domain.
    type: bool
    default: false
  autostart:
    description:
      - Whether libvirt starts the domain when the host boots. Default V(true) for O(state=running) and V(false) for
        O(state=defined); not used with O(state=absent).
      - Changed on the persistent domain only; the domain is not started or stopped by it.
    type: bool
  shutdown_timeout:
    description: With O(state=absent), seconds to wait for the guest to shut down after the ACPI power button.
    type: int
    default: 120
  force_off:
    description: With O(state=absent), power the domain off when it has not shut down within O(shutdown_timeout).
    type: bool
    default: false
  relax_vf_isolation:
    description:
      - The tenant's opt-in to VF settings that weaken its isolation. Without it, O(sriov_vfs) settings with spoof checking
        off or trust on for a VF this tenant holds are refused; with it they are applied, with a warning.
    type: bool
    default: false
  numa_cells:
    description:
      - The guest NUMA cells of a tenant, one per host node of a tenant that spans nodes (a placement of the planner under C(numa=spread)),
        in order (cell 0 first), or one cell for a tenant on one node that has GPUs or VFs (the tenants stage gives it on a q35 machine,
        so that each device's guest NUMA node is set). Each becomes a C(<cpu><numa><cell>) with its vCPUs and memory and a
        C(<numatune><memnode>) binding its memory to its host node (with O(memory_mode)); hugepages back every cell; each device of a
        cell sits on a C(pcie-root-port) under a C(pcie-expander-bus) whose C(<node>) is the cell, so the guest sees it on that cell's
        PCIe root bus (its C(numa_node) in sysfs, which C(nvidia-smi topo -m) and NCCL read).
      - The cells together hold every vCPU (up to O(max_vcpus)) once, the memory of the domain (O(memory_mb), in whole
        hugepages), and every address of O(gpus) and O(vfs) once. Devices in cells need a q35 O(machine).
      - Give O(nodeset) the cells' host nodes (or leave it out; a nodeset that names other nodes is refused, as is a cell on a node
        the host does not have, before any domain changes) and O(vcpu_pins) each vCPU on its cell's node. Empty (the default), no cells,
        and a definition loses the cells bound to host nodes and their expanders.
    type: list
    elements: dict
    default: []
    suboptions:
      node:
        description: The host NUMA node of the cell.
        type: int
        required: true
      vcpus:
        description: The cell's vCPUs, a cpulist (C(0-15)).
        type: str
        required: true
      memory_kib:
        description: The cell's memory in KiB.
        type: int
        required: true
      devices:
        description: The PCI addresses of the cell's GPUs, VFs and their companion functions (each on its node).
        type: list
        elements: str
        default: []
  pcie_switches:
    description:
      - The GPUs and VFs that the host has under one PCIe switch, one list of PCI addresses per switch (the tenants stage gives each
        tenant's from the host model, a GPU and the VFs within PIX or PXB of it). Each list goes under one emulated switch in the
        guest, a C(pcie-switch-upstream-port) on a C(pcie-root-port) with one C(pcie-switch-downstream-port) per device, so that
        C(nvidia-smi topo -m) and NCCL in the guest read the GPU and its VF as PIX, as on the host, not as PHB. On a tenant with
        O(numa_cells) the switch's root port sits on its cell's C(pcie-expander-bus) (all of a switch's devices in one cell).
      - Each list holds 2 to 32 addresses of O(gpus) and O(vfs), each address in one list at most; needs a q35 O(machine). A device
        in no list keeps its own root port. Empty (the default), no emulated switch holds the tenant's devices.
    type: list
    elements: list
    default: []
  image:
    description:
      - The tenant's disk from a base image. Its files go under O(guest_dir)C(/tenants/<name>/) (C(disk.qcow2), C(seed.iso),
        C(seed/), C(made.json), the list of what was made); an image fetched from O(image.url) goes to O(guest_dir)C(/base/).
      - The disk is made once; a later run keeps it (a larger O(image.size_gb) is reported, not applied).
      - A raw base (or download) must start with a partition table or a filesystem; a step that fails removes what it made of
        the tenant's own and its message lists what stays. A removal is refused while another tenant or domain reads one of
        the files it would delete (as its disk or base, or through its disk's backing chain).
    type: dict
    suboptions:
      base:
        description: A base image on the host (a qcow2 cloud image, read with C(qemu-img info)). One of O(image.base) and O(image.url).
        type: path
      url:
        description: Where to download the base image (C(curl) or C(wget) on the host); needs O(image.checksum).
        type: str
      checksum:
        description: C(ALGORITHM:HEX) (C(sha256:...)) of the base image; a mismatch fails before the disk is made.
        type: str
      size_gb:
        description: Disk size in GiB, at least the image's virtual size; default that size.
        type: int
      copy:
        description: Make the disk a full copy of the base (C(qemu-img convert)) instead of an overlay on it.
        type: bool
        default: false
  cloud_init:
    description:
      - The NoCloud seed of the guest (needs O(image)), built with C(genisoimage), C(xorrisofs) or C(mkisofs) on the host.
      - C(user-data) makes O(cloud_init.user) with passwordless sudo and the SSH keys, without password login, and installs
        O(cloud_init.packages) (with C(package_update) only when there are some); C(network-config) (version 2) gives the
        management NIC and the tenant's RDMA NIC (its first network VF, else its O(data_nic)), each matched by its MAC,
        their static addresses.
    type: dict
    suboptions:
      user:
        description: The guest user.
        type: str
        default: gpuvirt
      ssh_authorized_keys:
        description: OpenSSH public key lines for the user.
        type: list
        elements: str
        default: []
      packages:
        description: Packages the guest installs on its first boot (what the guest stage needs, for example C(rdma-core)).
        type: list
        elements: str
        default: []
      hostname:
        description: The guest's host name; default O(name).
        type: str
      rdma_address:
        description:
          - IPv4 address with prefix of the tenant's RDMA NIC (C(10.20.0.11/24)), its address on the RDMA network - its first
            network VF, else its O(data_nic). Refused for a tenant with neither (the address would be dropped).
        type: str
      fabric_manager_address:
        description:
          - The Fabric Manager service VM's management address, an IPv4 address without prefix (C(192.168.150.5)). With it,
            the first boot (user-data C(runcmd)) sets C(FABRIC_MODE=1) (the Shared NVSwitch multitenancy mode) and
            C(FM_CMD_BIND_INTERFACE) to it in C(/usr/share/nvidia/nvswitch/fabricmanager.cfg), then enables and restarts
            C(nvidia-fabricmanager); a missing file fails that boot with what the image lacks. The tenants stage sets it
            for O(fabric_vm).
        type: str
  management:
    description: The management NIC (virtio), on a libvirt network or a host bridge.
    type: dict
    suboptions:
      network:
        description: A libvirt network (it must exist when the tenant starts). One of O(management.network) and O(management.bridge).
        type: str
      bridge:
        description: A bridge on the host.
        type: str
      mac:
        description: Its MAC; default one derived from O(name) (locally administered, the same on every run).
        type: str
      address:
        description: Its static IPv4 address with prefix, written into the seed's C(network-config); left out, DHCP.
        type: str
      gateway:
        description: The default route's gateway.
        type: str
      dns:
        description: Name servers.
        type: list
        elements: str
        default: []
  data_nic:
    description:
      - A data NIC (virtio) on a libvirt network or a host bridge, the tenant's RDMA NIC where it has no network VF (hosts
        without SR-IOV NICs, tenants that need no VF; soft-RoCE runs on it in the guest). The seed gives it
        O(cloud_init.rdma_address), matched by its MAC, and the guest stage finds it by that MAC.
      - Refused for a tenant that also has a network VF (its RDMA NIC would be a guess).
    type: dict
    suboptions:
      network:
        description: A libvirt network (it must exist when the tenant starts). One of O(data_nic.network) and O(data_nic.bridge).
        type: str
      bridge:
        description: A bridge on the host (a Linux netdev name, at most 15 characters).
        type: str
      mac:
        description: Its MAC; default one derived from O(name) (C(gpuvirt.tenancy/<name>/data), locally administered).
        type: str
      vlan:
        description:
          - A VLAN tag (1-4094) on the NIC's port. libvirt tags only where the network supports it (an Open vSwitch bridge,
            or a libvirt network on one) and refuses it elsewhere when the tenant starts; left out, untagged.
        type: int
  management_network:
    description:
      - The tenants' management network as a libvirt network this call defines (when missing), starts and sets to start at
        boot, before any domain is defined or started; no DHCP (each guest's address is in its seed, O(management.address)).
      - A network of that name with other settings is refused, never redefined. Its result is RV(management_network).
    type: dict
    suboptions:
      name:
        description: The network's name (the tenants' O(management.network)).
        type: str
        required: true
      address:
        description: The host's address on it with the prefix (C(192.168.150.1/24)), the guests' gateway.
        type: str
        required: true
      forward:
        description: V(nat) to the host's uplink, V(route), or V(none) (isolated; the host still reaches the guests).
        type: str
        choices: [nat, route, none]
        default: nat
      bridge:
        description: The bridge's name on the host; default libvirt's (C(virbrN)).
        type: str
  guest_dir:
    description:
      - Where the guest files go (see O(image)); with O(state=absent), where they are removed from.
      - An absolute path without C(.), C(..) or C(//) components, under O(root).
    type: path
    default: /var/lib/libvirt/images/gpuvirt
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.libvirt
  - gpuvirt.tenancy.libvirt.PINS
attributes:
  diff_mode:
    details: The persistent domain XML before and after, of each domain.
notes:
  - The live diff (a second diff entry) lists the running domain's vCPU count, scheduler parameters, I/O limits, pins and NUMA nodeset
    before and after; a further entry shows the autostart flag before and after when it changes.
  - A KVM domain's host-passthrough CPU gets C(<maxphysaddr mode='passthrough'/>) where the host's libvirt is 8.7.0 or later (the
    version from the connection; under a captured O(root), from the capture). On an older libvirt it is left out and the call warns
    once (a GPU with large BARs may then need a host CPU with enough physical address bits); with the version unknown it is
    written, and the call says so.
seealso:
  - module: gpuvirt.tenancy.numa_pin
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Define tenant-a with a GPU and a VF that is no network function, 2M hugepages, no disk, SeaBIOS
  gpuvirt.tenancy.tenant_domain:
    name: tenant-a
    domain_type: qemu
    firmware: bios
    vcpus: 1
    memory_mb: 64
    hugepage_size: 2M
    gpus: ["0000:83:00.0"]
    vfs: ["0000:81:00.1"]

- name: Define and start a GPU tenant with a ConnectX VF (MAC, VLAN) and a disk, q35 with UEFI
  gpuvirt.tenancy.tenant_domain:
    name: tenant-b
    state: running
    machine: q35
    firmware: efi
    vcpus: 16
    memory_mb: 65536
    hugepage_size: 1G
    gpus: ["0000:07:00.0"]
    vfs: ["0000:0c:00.2"]
    network_vfs: ["0000:0c:00.2"]
    mac: "52:54:00:00:00:0b"
    vlan: 100
    disks:
      - path: /var/lib/libvirt/images/tenant-b.qcow2

- name: Grow a running tenant from 2 to 4 vCPUs live (it was defined with max_vcpus 8), as a batch tenant
  gpuvirt.tenancy.tenant_domain:
    name: tenant-c
    live: true
    vcpus: 4
    max_vcpus: 8
    memory_mb: 16384
    hugepage_size: 1G
    gpus: ["0000:07:00.0"]
    disks:
      - path: /var/lib/libvirt/images/tenant-c.qcow2
    qos:
      cpu_shares: 256
      cpu_period: 100000
      cpu_quota: 50000
      iotune:
        total_iops_sec: 2000
        total_bytes_sec: 104857600
  register: tenant_c

- name: Define, pin and start a tenant from a placement plan in one call
  gpuvirt.tenancy.tenant_domain:
    name: tenant-a
    state: running
    live: true
    vcpus: 2
    memory_mb: 16384
    hugepage_size: 1G
    gpus: ["0000:07:00.0"]
    vcpu_pins:
      0: "4"
      1: "5"
    emulator_cpus: "6"
    nodeset: "1"

- name: Define and start two tenants and remove a third, in one call over one libvirt connection
  gpuvirt.tenancy.tenant_domain:
    domains:
      - name: tenant-old
        state: absent
      - {name: tenant-a, state: running, live: true, vcpus: 2, memory_mb: 16384, gpus: ["0000:07:00.0"], nodeset: "1"}
      - name: tenant-b
        state: defined
        vcpus: 4
        memory_mb: 8192
  register: tenants

- name: Set the tenants' VF MAC and VLAN, then define and start the tenants, in one call
  gpuvirt.tenancy.tenant_domain:
    sriov_vfs:
      pfs:
        - pf: "0000:81:00.0"
          vfs: [{address: "0000:81:00.2", mac: "52:54:00:00:00:0a", vlan: 100}]
    domains:
      - {name: tenant-a, state: running, vcpus: 2, memory_mb: 16384, vfs: ["0000:81:00.2"], network_vfs: ["0000:81:00.2"],
         mac: "52:54:00:00:00:0a", vlan: 100}

- name: Start a tenant that boots a Debian cloud image (overlay, NoCloud seed, management NIC on a libvirt network)
  gpuvirt.tenancy.tenant_domain:
    name: tenant-a
    state: running
    machine: q35
    vcpus: 8
    memory_mb: 32768
    vfs: ["0000:81:00.2"]
    network_vfs: ["0000:81:00.2"]
    mac: "52:54:00:00:00:0a"
    vlan: 100
    image:
      base: /var/lib/libvirt/images/debian-12-genericcloud-amd64.qcow2
      size_gb: 40
    cloud_init:
      ssh_authorized_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly ops@example"]
      packages: [rdma-core, ibverbs-utils]
      rdma_address: 10.20.0.11/24
    management:
      network: gpuvirt-mgmt
      address: 192.168.150.11/24
      gateway: 192.168.150.1
    management_network:
      name: gpuvirt-mgmt
      address: 192.168.150.1/24

- name: The tenants stage in one call - read the domains, plan, remove, set the VFs, define, pin and start on the host
  gpuvirt.tenancy.tenant_domain:
    tenants:
      - {name: tenant-a, vcpus: 16, memory_mb: 65536, gpus: 1, vfs: 1, vlan: 100, state: running}
      - {name: tenant-b, vcpus: 8, memory_mb: 32768, gpus: 1, priority: batch, state: running}
      - {name: tenant-old, state: absent}
    policy: {numa: required, reserved_cpus: "0-1", smt: whole_cores, emulator: housekeeping, hugepage_size: 1G}
    machine: q35
    live: true
  register: tenants_stage

- name: Refuse the tenants that do not fit
  ansible.builtin.fail:
    msg: "{{ tenants_stage.unplaced }}"
  when: tenants_stage.unplaced | length > 0

- name: Say which tenants a restart would finish
  ansible.builtin.debug:
    msg: "restart to apply: {{ tenants.restart_required | join(', ') }}"
  when: tenants.restart_required | length > 0

- name: Remove a tenant, powering it off if it ignores the shutdown for 60 s
  gpuvirt.tenancy.tenant_domain:
    name: tenant-b
    state: absent
    shutdown_timeout: 60
    force_off: true
"""

RETURN = r"""
plan:
  description:
    - With O(tenants), the plan made on the host (as the C(gpuvirt.tenancy.plan_tenants) filter returns it) - C(placements),
      C(unplaced), C(notes), C(free), C(removed), C(released), C(vf_resets), C(search), C(groups) and C(foreign).
  returned: with O(tenants)
  type: dict
  sample: {placements: {}, unplaced: {}, notes: {}, removed: [], released: {}, foreign: {}}
placements:
  description: With O(tenants), each placed tenant's placement (its node, GPUs, VFs, pins, hugepages), by name.
  returned: with O(tenants)
  type: dict
  sample: {tenant-a: {numa_node: 1, gpus: ["0000:82:00.0"], vfs: ["0000:81:00.1"], vcpu_pins: {"0": "2"}, kept: true}}
unplaced:
  description: With O(tenants), the tenants that do not fit, with the reason; nothing of theirs is changed.
  returned: with O(tenants)
  type: dict
  sample: {tenant-c: "no NUMA node has 2 free GPUs"}
notes:
  description: With O(tenants), how defined tenants were kept, resized or re-planned.
  returned: with O(tenants)
  type: dict
  sample: {tenant-a: "resized from 2 to 4 vCPUs where it is"}
foreign:
  description:
    - With O(tenants), the domains that are not listed tenants and what they hold (C(gpus), C(vfs), C(other_devices),
      C(cpus), C(numa_node), C(hugepages), C(memory_mb), C(active), C(notes)); kept out of the plan, never reused nor
      removed.
  returned: with O(tenants)
  type: dict
  sample: {legacy-vm: {active: true, gpus: ["0000:30:00.0"], vfs: [], other_devices: [], cpus: "16-17", numa_node: 1}}
vf_settings:
  description: With O(tenants), the placed tenants' network VF settings, per PF (C([{pf, vfs - [{address, mac, vlan, spoofchk, trust}]}])).
  returned: with O(tenants)
  type: list
  elements: dict
  sample: [{pf: "0000:81:00.0", vfs: [{address: "0000:81:00.2", mac: "52:54:00:00:00:0a", vlan: 100, spoofchk: true, trust: false}]}]
fabric_partitions:
  description:
    - With O(tenants) and O(fabric_manager), the Fabric Manager partition steps of the call, in the order they are taken -
      C(read) (whether C(fmpm -l) was read; false in a preview or where no tenant has a partition) and C(steps), each
      C({tenant, id, physical_ids, step (activate or deactivate), done}) (C(done) false in check mode).
  returned: with O(tenants) and O(fabric_manager)
  type: dict
  sample: {read: true, steps: [{tenant: tenant-a, id: 3, physical_ids: [1, 3], step: activate, done: true}]}
fabric_held:
  description:
    - With O(tenants) and O(fabric_manager), the tenants defined and not started because the Fabric Manager's service VM
      (O(fabric_vm)) did not run before the call, so that no Fabric Manager could activate their partitions; the next run
      activates them and starts the tenants.
  returned: with O(tenants) and O(fabric_manager)
  type: list
  elements: str
  sample: [tenant-a]
pci_links:
  description:
    - With O(tenants), per placed tenant with GPUs and VFs, the host's PCIe link facts its guest's NCCL topology file is made of
      (role C(guest_rdma), nccl_env's O(gpuvirt.tenancy.nccl_env#module:topo_links)) - C(level) (the plan's distance between its
      GPUs and VFs), C(gpu), C(nic) (its VFs' PF) and C(switch) (the bridge they share, with C(PIX)), each C({link_speed, link_width})
      from the host's sysfs (the lower of the device's C(max_link_speed)/C(max_link_width) and its parent port's), or
      null with the reason in C(unknown) (a capture without C(max_link_speed), GPUs or PFs with different links, no shared
      bridge), and C(missing), why the distance is unknown, the others null then.
    - With C(level) C(PXB) also C(shared_switch) (the switch the GPUs and PFs share), C(gpu_switch) and C(nic_switch) (the
      GPUs' and the PFs' switch below it, each its upstream port as NCCL reads a switch), each a link taken the same way or
      null with the reason in C(unknown); a tenant of another level has none of these keys.
  returned: with O(tenants)
  type: dict
  sample: {tenant-a: {level: PIX, gpu: {link_speed: "16.0 GT/s PCIe", link_width: 16}, nic: {link_speed: "16.0 GT/s PCIe",
           link_width: 16}, switch: {link_speed: "16.0 GT/s PCIe", link_width: 16}, missing: null, unknown: {}}}
guest_layouts:
  description:
    - With O(tenants) and O(preview), per placed tenant with VFs, where its guest will see its GPUs and VFs as its domain lays
      them out - C(gpus), C(nics) (its VFs), C(cells) (the devices of each guest NUMA cell, by cell index), C(switches) (the
      devices under one emulated switch) and C(classes) (each device's PCI class in the host model, a VF not made yet its
      PF's) - of which the preview shows the NCCL topology file its guest stage will write (action M(gpuvirt.tenancy.stage_result)).
  returned: with O(tenants) and O(preview)
  type: dict
  sample: {tenant-a: {gpus: ["0000:10:00.0"], nics: ["0000:18:00.1"], cells: [["0000:10:00.0", "0000:18:00.1"]],
           switches: [["0000:10:00.0", "0000:18:00.1"]], classes: {"0000:10:00.0": "0x030200", "0000:18:00.1": "0x020000"}}}
fabric_vm:
  description: With O(tenants) and O(fabric_vm), the service VM's C(name), C(nvswitches) and C(address) (without prefix); null otherwise.
  returned: with O(tenants)
  type: dict
  sample: {"name": "fabric-manager", "nvswitches": ["0000:6d:00.0", "0000:6e:00.0"], "address": "192.168.150.5"}
preview_notes:
  description: With O(tenants) and O(preview), what the plan assumes of the earlier stages; empty otherwise.
  returned: with O(tenants)
  type: list
  elements: str
  sample: ["PREVIEW: the tenants are planned on the host as the boot, SR-IOV and VFIO stages will leave it, not as captured:"]
domains:
  description:
    - With O(domains) or O(tenants), the result of each domain by name, in the order given; each has C(name) and the fields one domain's
      call returns (RV(xml), RV(created), RV(defined), RV(powered_on), RV(removed), RV(stopped), RV(forced_off),
      RV(released_devices), RV(live_changed), RV(restart_required), RV(restart_reasons), RV(autostart), RV(mmio_window_mb)) as
      booleans and lists, and C(changed).
    - When a domain fails, the call fails with the results of the domains before it (they were acted on).
  returned: with O(domains) or O(tenants)
  type: dict
  sample:
    tenant-a:
      name: tenant-a
      changed: true
      xml: "<domain type='kvm'><name>tenant-a</name>...</domain>"
      created: true
      defined: true
      powered_on: true
      removed: false
      stopped: false
      forced_off: false
      released_devices: []
      live_changed: false
      restart_required: false
      restart_reasons: []
      autostart: true
      mmio_window_mb: null
xml:
  description: The persistent domain XML after the change (as it would be, in check mode).
  returned: without O(domains) or O(tenants)
  type: str
  sample: "<domain type='kvm'><name>tenant-a</name>...</domain>"
created:
  description:
    - Whether the domain was (or would be) newly defined.
    - With O(domains) or O(tenants), the names of the domains that were (a list; true when not empty), as for each flag below.
  returned: success
  type: raw
  sample: true
defined:
  description: Whether the definition was (or would be) written.
  returned: success
  type: raw
  sample: true
powered_on:
  description:
    - Whether the domain was (or would be) started (powered on).
    - Named so, not C(started), because Ansible's C(async_status) reads a C(started) key of a module's result as the job's own
      state; so the call can run with C(async).
  returned: success
  type: raw
  sample: ["tenant-a"]
removed:
  description: Whether the domain was (or would be) undefined (O(state=absent)).
  returned: success
  type: raw
  sample: false
stopped:
  description: Whether the running domain was (or would be) shut down to remove it.
  returned: success
  type: raw
  sample: false
forced_off:
  description: Whether it had to be powered off after O(shutdown_timeout).
  returned: success
  type: raw
  sample: false
released_devices:
  description:
    - PCI addresses the removed domain held (hostdevs and hostdev interfaces); they stay bound to vfio-pci. With O(domains),
      those of every removed domain.
  returned: success
  type: list
  elements: str
  sample: ["0000:82:00.0", "0000:81:00.1"]
live_changed:
  description: Whether the running domain was (or would be) changed live.
  returned: success
  type: raw
  sample: false
restart_required:
  description: The domain runs and part of its new definition applies only when it is restarted (see RV(restart_reasons)).
  returned: success
  type: raw
  sample: false
restart_reasons:
  description:
    - What the running domain keeps until it is restarted, and why (also given as warnings). With O(domains), those of every
      domain.
  returned: success
  type: list
  elements: str
  sample: ["running domain tenant-a keeps its hugepage backing until it is restarted (the definition is updated; restart the tenant to apply)"]
autostart:
  description: Whether libvirt starts the domain when the host boots, after the change (false once removed).
  returned: success
  type: raw
  sample: true
sriov_vfs:
  description:
    - With O(sriov_vfs), the result of M(gpuvirt.tenancy.sriov_vfs) run in this call (with O(gpuvirt.tenancy.sriov_vfs#module:pfs), its C(pfs)).
    - With O(tenants), that of the VF settings the plan gives (the released VFs cleared, the placed tenants' set), when there
      are any and it is not a preview.
  returned: with O(sriov_vfs), or with O(tenants) when VFs are set
  type: dict
  sample: {changed: false, pfs: [{pf: "0000:81:00.0", netdev: ens1f0np0, num_vfs: 4, vfs: []}]}
guest:
  description:
    - With O(image), O(management) or O(data_nic), the guest's files and NICs (null otherwise); with O(domains), in each
      domain's result.
  returned: unless O(state=absent); without O(domains) or O(tenants)
  type: dict
  sample:
    disk: /var/lib/libvirt/images/gpuvirt/tenants/tenant-a/disk.qcow2
    seed: /var/lib/libvirt/images/gpuvirt/tenants/tenant-a/seed.iso
    console_log: /var/log/libvirt/qemu/tenant-a-console.log
    made: true
    management: {network: gpuvirt-mgmt, bridge: null, mac: "56:2f:1c:aa:03:9e", address: 192.168.150.11/24}
    data_nic: {network: gpuvirt-data, bridge: null, mac: "ee:e4:40:62:27:ee", vlan: null}
management_network:
  description: With O(management_network), what was (or would be) done to it.
  returned: with O(management_network)
  type: dict
  sample: {name: gpuvirt-mgmt, address: 192.168.150.1/24, forward: nat, defined: true, started: true, autostart_set: true, changed: true}
guest_files_removed:
  description: With O(state=absent), the files made for the tenant's guest that were (or would be) deleted.
  returned: with O(state=absent); without O(domains) or O(tenants)
  type: list
  elements: str
  sample: ["/var/lib/libvirt/images/gpuvirt/tenants/tenant-b/disk.qcow2"]
mmio_window_mb:
  description: The 64-bit MMIO window (MiB) the definition asks OVMF for; null when OVMF's default is enough or O(firmware=bios).
  returned: unless O(state=absent); without O(domains) or O(tenants)
  type: int
  sample: 262144
elapsed_s:
  description:
    - Seconds each long step of this call took, for those that ran (never in check mode), named as in the diff - C(fetch PATH)
      (the download of a guest image from its URL), C(copy PATH) (a guest disk made as a full copy of its base image).
  returned: when a long step ran
  type: dict
  sample: {"fetch /var/lib/libvirt/images/gpuvirt/base/debian-12-genericcloud-amd64.qcow2": 41.2}
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_call import TENANT_DOMAIN_ARGS, tenant_domain

MODULE_ARGS = TENANT_DOMAIN_ARGS


def main(host=None):
    run_module(MODULE_ARGS, tenant_domain, host=host)


if __name__ == "__main__":
    main()
