# -*- coding: utf-8 -*-
"""The GRUB edit with its boot menu commands, over a tree with recorded commands: which tool
each distribution family gets, a stale grub.cfg, and the steps recorded on the run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import bootloader
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import grub_read, split_cmdline
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


# -- an argument with ';' (pci=config_acs= with a list of bridges): in single quotes, proven with GRUB's own tools
ACS_VALUE = "1xxxx0x@0000:07:00.0;1xxxx0x@0000:0b:00.0"
ACS_LIST = "pci=config_acs=" + ACS_VALUE
ACS_OPS = OPS + [kernel_args.ConfigAcs(ACS_VALUE)]
GRUB_SCRIPT_CHECK = shutil.which("grub-script-check")
TEN_LINUX = "/etc/grub.d/10_linux"
MKCONFIG_LIB = "/usr/share/grub/grub-mkconfig_lib"
real_grub = pytest.mark.skipif(not (GRUB_SCRIPT_CHECK and os.path.isfile(TEN_LINUX) and os.path.isfile(MKCONFIG_LIB)),
                               reason="grub-common (grub-script-check, /etc/grub.d/10_linux, grub-mkconfig_lib) is not installed")


def menu_entry(tmp_path, defaults):
    """The menu entry grub-mkconfig writes for one kernel from the GRUB defaults file ``defaults``:
    /bin/sh sources grub-mkconfig_lib and the file, then runs the linux_entry function of the
    installed /etc/grub.d/10_linux with the args grub-mkconfig gives it ("${GRUB_CMDLINE_LINUX}
    ${GRUB_CMDLINE_LINUX_DEFAULT}"); only what reads the disks (the device id, the commands that
    reach the root device, the saved default entry) is left out."""
    text = open(TEN_LINUX, encoding="utf-8").read()
    start = text.index("linux_entry ()\n")
    end = text.index("\n}\nEOF\n}\n", start) + len("\n}\nEOF\n}\n")  # its last heredoc writes the entry's "}"
    script = tmp_path / "entry.sh"
    script.write_text("set -e\n. %s\n. \"$1\"\n" % MKCONFIG_LIB
                      + "grub_get_device_id () { echo test; }\nprepare_grub_to_access_device () { :; }\n"
                      + "save_default_entry () { :; }\n" + text[start:end]
                      + "\nrel_dirname=/boot basename=vmlinuz-6.15.0 linux=/boot/vmlinuz-6.15.0 initrd=initrd.img-6.15.0\n"
                      + "linux_root_device_thisversion=UUID=0 dirname=/boot CLASS='--class debian' quiet_boot=0\n"
                      + 'linux_entry Debian 6.15.0 simple "${GRUB_CMDLINE_LINUX} ${GRUB_CMDLINE_LINUX_DEFAULT}"\n')
    proc = subprocess.run(["sh", str(script), defaults], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def linux_words(entry):
    """The words of the entry's linux line after the kernel's path, as they stand in grub.cfg."""
    [line] = [line for line in entry.splitlines() if line.split()[:1] == ["linux"]]
    return split_cmdline(line)[2:]


def grub_script_check(tmp_path, text):
    """grub-script-check's exit status for ``text`` (GRUB's own lexer and parser)."""
    path = tmp_path / "check.cfg"
    path.write_text(text)
    return subprocess.run([GRUB_SCRIPT_CHECK, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False).returncode


def one_word_list(words):
    """A GRUB script that is well formed only when ``words`` hold no command end: ``for`` takes the
    words up to a ';', and what follows must be ``do``."""
    return 'for arg in %s; do echo "$arg"; done\n' % " ".join(words)


def acs_edit(tmp_path, ops=None):
    """The GRUB edit of ``ops`` (ACS_OPS when None) on a Debian tree, made on the first call."""
    if not os.path.exists(str(tmp_path / "etc")):
        host = FakeHost(tmp_path)
        host.write("/etc/os-release", "ID=debian\n")
        host.write("/etc/default/grub", LINUX)
    commands = RecordedCommands(programs=["update-grub"], replies=[(["update-grub"],)])
    return bootloader.GrubCmdlineEdit(Host(str(tmp_path), commands=commands), ACS_OPS if ops is None else ops)


@real_grub
def test_a_list_goes_into_the_file_in_single_quotes_and_grub_gives_the_kernel_one_arg(tmp_path):
    edit = acs_edit(tmp_path)
    plan = edit.plan()
    quoted = "'%s'" % ACS_LIST
    # the value in the shell's double quotes, the arg in GRUB's single quotes; the kernel's arg missing as it will read it
    assert plan["after"] == 'GRUB_CMDLINE_LINUX="quiet intel_iommu=on iommu=pt %s"\n' % quoted
    assert plan["args"][-1] == quoted and plan["args_missing"] == ["intel_iommu=on", "iommu=pt", ACS_LIST]
    edit.apply(Run())
    entry = menu_entry(tmp_path, str(tmp_path / "etc/default/grub"))
    words = linux_words(entry)
    assert quoted in words  # 10_linux copies the value into the linux line as it is
    assert grub_script_check(tmp_path, entry) == 0
    assert grub_script_check(tmp_path, one_word_list(words)) == 0
    assert [grub_read(w) for w in words] == ["root=UUID=0", "ro", "quiet", "intel_iommu=on", "iommu=pt", ACS_LIST]
    # the boot that follows: grub.cfg holds the entry, the kernel shows the arg without GRUB's quotes
    (tmp_path / "boot/grub").mkdir(parents=True)
    (tmp_path / "boot/grub/grub.cfg").write_text(entry)
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "proc/cmdline").write_text("BOOT_IMAGE=/boot/vmlinuz-6.15.0 root=UUID=0 ro quiet intel_iommu=on iommu=pt %s\n"
                                           % ACS_LIST)
    again = acs_edit(tmp_path).plan()
    assert (again["changed"], again["file_changed"], again["reboot_required"], again["args_missing"]) == (False, False, False, [])
    assert again["args"] == plan["args"]
    # removal: the quoted word goes, and the running kernel's arg is what the reboot takes away
    gone = acs_edit(tmp_path, OPS + [kernel_args.ConfigAcs(None)]).plan()
    assert gone["after"] == 'GRUB_CMDLINE_LINUX="quiet intel_iommu=on iommu=pt"\n' and gone["args_unwanted"] == [ACS_LIST]
    assert gone["bootloader_commands"] == [["/usr/bin/update-grub"]] and gone["reboot_required"]


@real_grub
def test_the_same_list_unquoted_is_cut_by_grub_and_the_edit_quotes_it(tmp_path):
    host = FakeHost(tmp_path)
    host.write("/etc/os-release", "ID=debian\n")
    host.write("/etc/default/grub", 'GRUB_CMDLINE_LINUX="quiet %s"\n' % ACS_LIST)
    entry = menu_entry(tmp_path, host.p("/etc/default/grub"))
    words = linux_words(entry)
    # the control: GRUB ends the linux command at the ';' (the entry is still a script, the rest a command of its own)
    assert grub_script_check(tmp_path, entry) == 0
    assert grub_script_check(tmp_path, one_word_list(words)) != 0
    assert grub_read(words[-1]) == "pci=config_acs=1xxxx0x@0000:07:00.0"
    # the edit that wants the list writes it quoted; one that does not touch it refuses the file
    plan = acs_edit(tmp_path).plan()
    assert plan["file_changed"] and plan["after"] == 'GRUB_CMDLINE_LINUX="quiet \'%s\' intel_iommu=on iommu=pt"\n' % ACS_LIST
    with pytest.raises(InputError, match=r"GRUB_CMDLINE_LINUX holds %s, whose ';' .*the kernel gets only "
                                         r"pci=config_acs=1xxxx0x@0000:07:00.0.* single quotes" % re.escape(ACS_LIST)):
        acs_edit(tmp_path, OPS).plan()
    edit = acs_edit(tmp_path)
    edit.plan()
    edit.apply(Run())
    fixed = menu_entry(tmp_path, host.p("/etc/default/grub"))
    assert grub_script_check(tmp_path, one_word_list(linux_words(fixed))) == 0


def test_an_arg_no_quoting_can_carry_is_refused_and_nothing_is_written(tmp_path):
    edit = acs_edit(tmp_path, OPS + [kernel_args.ConfigAcs("1xxxx0x@0000:07:00.0;1xxxx0x@0000:0b:00.0'")])
    with pytest.raises(InputError, match="no quoting makes GRUB read it back as one argument; nothing was changed"):
        edit.plan()
    assert open(str(tmp_path / "etc/default/grub"), encoding="utf-8").read() == LINUX


@pytest.mark.parametrize("os_release, programs, refused", [
    ("ID=debian\n", [], None),
    ("ID=ubuntu\nID_LIKE=debian\n", ["update-grub"], None),
    ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', ["grub2-mkconfig", "grubby"], "RHEL-family host .*BLS entries"),
    ("ID=arch\n", ["grub-mkconfig"], None),
    ("ID=arch\n", [], "none of update-grub and grub-mkconfig .*ID arch"),
])
def test_where_a_quoted_arg_may_go(tmp_path, os_release, programs, refused):
    FakeHost(tmp_path).write("/etc/os-release", os_release)
    reason = bootloader.quoted_arg_refusal(Sysfs(str(tmp_path)), RecordedCommands(programs=programs).which)
    assert reason is None if refused is None else re.search(refused, reason)


def test_a_list_never_goes_to_grubby(tmp_path):
    host = FakeHost(tmp_path)
    host.write("/etc/os-release", 'ID="rocky"\n')
    host.write("/etc/default/grub", 'GRUB_CMDLINE_LINUX="quiet"\nGRUB_ENABLE_BLSCFG=true\n')
    commands = RecordedCommands(programs=["grubby", "grub2-mkconfig"])
    edit = bootloader.GrubCmdlineEdit(Host(str(tmp_path), commands=commands), ACS_OPS)
    with pytest.raises(InputError, match="%s would go into the BLS entries' options lines" % re.escape(ACS_LIST)):
        edit.plan()
    assert commands.calls == []
