# -*- coding: utf-8 -*-
"""The GRUB edit with its boot menu commands, over a tree with recorded commands: which tool
each distribution family gets, a stale grub.cfg, and the steps recorded on the run."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import bootloader
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import split_cmdline
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

from fakes.boot_entries import EL8_ENTRY, EL8_GRUBENV, EL9_ENTRY, EL9_OPTIONS  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.host_tree import FakeHost  # pylint: disable=import-error

OPS = kernel_args.iommu_ops("intel")
LINUX = 'GRUB_CMDLINE_LINUX="quiet"\n'


def tree(tmp_path, os_release):
    host = FakeHost(tmp_path)
    host.write("/etc/os-release", os_release)
    host.write("/etc/default/grub", LINUX)
    return host


@pytest.mark.parametrize("os_release, programs, commands", [
    ("ID=debian\n", ["update-grub", "grub-mkconfig"], [["/usr/bin/update-grub"]]),
    ("ID=ubuntu\nID_LIKE=debian\n", ["grub-mkconfig"], [["/usr/bin/grub-mkconfig", "-o", "/boot/grub/grub.cfg"]]),
    ("ID=\"almalinux\"\n", ["grub2-mkconfig"], [["/usr/bin/grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]]),
    ("", ["update-grub"], [["/usr/bin/update-grub"]]),  # no os-release: the tool present decides
])
def test_tool_per_family(tmp_path, os_release, programs, commands):
    host = tree(tmp_path, os_release)
    host.write("/boot/grub2/grub.cfg", "# generated")
    edit = bootloader.GrubCmdlineEdit(Host(str(tmp_path), commands=RecordedCommands(programs=programs)), OPS)
    plan = edit.plan()
    assert plan["bootloader_commands"] == commands and plan["changed"] is True
    assert plan["after"] == 'GRUB_CMDLINE_LINUX="quiet intel_iommu=on iommu=pt"\n'


def test_unknown_family_without_tools_is_an_input_error(tmp_path):
    tree(tmp_path, "ID=arch\n")
    edit = bootloader.GrubCmdlineEdit(Host(str(tmp_path), commands=RecordedCommands()), OPS)
    with pytest.raises(InputError, match="cannot tell how this host builds its boot menu .*ID arch"):
        edit.plan()


def test_apply_records_each_step(tmp_path):
    host = tree(tmp_path, "ID=debian\n")
    commands = RecordedCommands(replies=[(["update-grub"],)])
    edit = bootloader.GrubCmdlineEdit(Host(str(tmp_path), commands=commands), OPS)
    edit.plan()
    run = Run()
    assert edit.apply(run) is None and run.changed is True
    assert commands.calls == [["update-grub"]]
    assert open(host.p("/etc/default/grub"), encoding="utf-8").read() == 'GRUB_CMDLINE_LINUX="quiet intel_iommu=on iommu=pt"\n'


# The args a GPU-passthrough guide has laptops add to GRUB_CMDLINE_LINUX_DEFAULT for bbswitch
# (Bumblebee-Project/bbswitch issue 140): a quoted value with a blank, one arg for the kernel.
ACPI_OSI = 'nogpumanager acpi_osi=! acpi_osi=Linux acpi_osi="Windows 2015" pcie_port_pm=off'
IOMMU = ["intel_iommu=on", "iommu=pt"]


@pytest.mark.parametrize("cfg, wanted, stale", [
    ("menuentry 'Debian' {\n\tlinux\t/vmlinuz ro quiet\n}\n", IOMMU, True),
    ("menuentry 'Debian' {\n\tlinux\t/vmlinuz ro quiet intel_iommu=on iommu=pt\n}\n"
     "menuentry 'Debian (recovery)' {\n\tlinux\t/vmlinuz ro single\n}\n", IOMMU, False),
    ("# no entries\n", IOMMU, False),
    ("", IOMMU, False),
    # update-grub writes the value as it is: the quoted arg is in the entry, which is not stale
    ("menuentry 'Ubuntu' {\n\tlinux\t/boot/vmlinuz-6.8.0-41-generic root=UUID=0 ro %s intel_iommu=on iommu=pt $vt_handoff\n}\n"
     % ACPI_OSI, split_cmdline(ACPI_OSI) + IOMMU, False),
    ("menuentry 'Ubuntu' {\n\tlinux\t/boot/vmlinuz-6.8.0-41-generic root=UUID=0 ro %s $vt_handoff\n}\n"
     % ACPI_OSI, split_cmdline(ACPI_OSI) + IOMMU, True),
])
def test_cfg_stale(cfg, wanted, stale):
    assert bootloader.cfg_stale(cfg, wanted) is stale


PCI_STUB = kernel_args.pre_bind_ops(["10de:2330"], "vfio-pci")
HUGE_1G = kernel_args.args_ops([{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "8"}])


@pytest.mark.parametrize("ops, current, other, given", [
    # the Proxmox VE wiki's PCI(e) Passthrough line in GRUB_CMDLINE_LINUX_DEFAULT, the edit in GRUB_CMDLINE_LINUX
    (OPS, "quiet", "quiet intel_iommu=on iommu=pt", ["intel_iommu=on", "iommu=pt"]),
    (OPS, "quiet intel_iommu=off", "quiet intel_iommu=on", ["intel_iommu=on"]),        # replaced here, given there
    (OPS, "quiet iommu=pt", "intel_iommu=on iommu=pt", ["intel_iommu=on"]),            # kept where it already is
    (OPS, "quiet", "intel_iommu=on,sm_on", []),                                        # another value: not the same arg
    (OPS + PCI_STUB, "", "quiet vfio_pci.ids=10de:2330", ["vfio-pci.ids=10de:2330"]),  # - and _ are one name
    (PCI_STUB, "", "vfio-pci.ids=10de:2330 vfio-pci.ids=10de:1b80", []),              # the other one would change
    (HUGE_1G, "", "hugepagesz=1G hugepages=8", []),                                    # a count belongs to its size
])
def test_given_elsewhere(ops, current, other, given):
    current, other = split_cmdline(current), split_cmdline(other)
    wanted = kernel_args.apply_ops(ops, current)
    assert bootloader.given_elsewhere(ops, current, wanted, other) == given


@pytest.mark.parametrize("entry, grubenv, args", [
    (EL8_ENTRY, EL8_GRUBENV, split_cmdline(EL8_GRUBENV.splitlines()[2][len("kernelopts="):])),
    (EL8_ENTRY, None, None),                                   # kernelopts unknown: nothing to compare
    (EL9_ENTRY, None, split_cmdline(EL9_OPTIONS)),             # $tuned_params left out
    (EL8_ENTRY.replace("options $kernelopts $tuned_params\n", ""), EL8_GRUBENV, None),
])
def test_bls_options(entry, grubenv, args):
    assert bootloader.bls_options(entry, grubenv) == args


def test_read_os_release(tmp_path):
    host = FakeHost(tmp_path)
    host.write("/usr/lib/os-release", 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n')
    assert bootloader.read_os_release(Sysfs(str(tmp_path))) == {"rocky", "rhel", "centos", "fedora"}


def efi_variable(host, path, text):
    """An EFI variable as efivarfs shows it: 4 bytes of attributes (boot service and runtime access,
    as systemd-boot sets them), then a NUL-terminated UTF-16LE string (systemd's Boot Loader Interface)."""
    os.makedirs(os.path.dirname(host.p(path)), exist_ok=True)
    with open(host.p(path), "wb") as handle:
        handle.write(b"\x06\x00\x00\x00" + (text + "\0").encode("utf-16-le"))


@pytest.mark.parametrize("loader, running, update, refused", [
    ("systemd-boot 252.30", "BOOT_IMAGE=/vmlinuz ro quiet", "auto", True),           # Proxmox VE, ZFS on UEFI
    ("systemd-boot 252.30", "ro quiet intel_iommu=on iommu=pt", "auto", False),      # the args came another way
    ("systemd-boot 252.30", "BOOT_IMAGE=/vmlinuz ro quiet", "none", False),          # a copy of the file, on purpose
    ("GRUB 2.12", "BOOT_IMAGE=/vmlinuz ro quiet", "auto", False),                    # GRUB's bli module
    (None, "BOOT_IMAGE=/vmlinuz ro quiet", "auto", False),                           # no EFI variable: legacy BIOS
])
def test_a_host_booted_by_systemd_boot_is_refused_an_edit_it_would_not_read(tmp_path, loader, running, update, refused):
    host = tree(tmp_path, "ID=debian\n")
    host.write("/proc/cmdline", running)
    if loader:
        efi_variable(host, bootloader.LOADER_INFO, loader)
    commands = RecordedCommands(programs=["update-grub"])
    edit = bootloader.GrubCmdlineEdit(Host(str(tmp_path), commands=commands), OPS, bootloader_update=update)
    if refused:
        with pytest.raises(InputError, match=r"booted with systemd-boot 252\.30 .*would not get \+intel_iommu=on \+iommu=pt "
                                             r".*/etc/kernel/cmdline .*proxmox-boot-tool refresh .*bootloader_update: none"):
            edit.plan()
        assert open(host.p("/etc/default/grub"), encoding="utf-8").read() == LINUX and commands.calls == []
    else:
        assert edit.plan()["after"] == 'GRUB_CMDLINE_LINUX="quiet intel_iommu=on iommu=pt"\n'


def test_boot_loader_name_reads_the_efi_variable(tmp_path):
    host = FakeHost(tmp_path)
    assert bootloader.boot_loader_name(Sysfs(str(tmp_path))) is None
    efi_variable(host, bootloader.LOADER_INFO, "systemd-boot 257.9-1~bpo12+1")
    assert bootloader.boot_loader_name(Sysfs(str(tmp_path))) == "systemd-boot 257.9-1~bpo12+1"
    host.write(bootloader.LOADER_INFO, "\x06\x00")  # cut short: no value
    assert bootloader.boot_loader_name(Sysfs(str(tmp_path))) is None
