# -*- coding: utf-8 -*-
"""The iommu_grub module end to end over fake roots: a GRUB file like the lab host's
(Debian 12, intel_iommu=off), real distribution files, bootloader commands, bad inputs.
Every run injects a Host over the tree with recorded commands; nothing is patched."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.modules import iommu_grub

from conftest import run_module  # pylint: disable=import-error
from fakes.boot_entries import EL8_ENTRY, EL8_GRUBENV  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.host_tree import FakeHost  # pylint: disable=import-error

BOOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "boot")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
CENTOS9 = os.path.join(BOOT, "etc-default-grub_centos-stream9_default.txt")
UBUNTU_TEMPLATE = os.path.join(BOOT, "etc-default-grub_TEMPLATE_ubuntu-22.04-jammy_grub2-2.06-2ubuntu7.2.txt")
# The bare lab host: the Ubuntu/Debian template's layout with the lab's args.
LAB_GRUB_LINUX = 'GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 intel_iommu=off"'
LAB_RUNNING = "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=UUID=3a99c6a2-d04c-47d9-94cb-21e3ebaf1df2 ro console=ttyS0,115200n8 intel_iommu=off quiet"
LAB_ARGS = {"pre_bind_ids": ["1234:11e8"], "bootloader_update": "none"}
GRUB = "/etc/default/grub"
COPY = "/srv/review/grub"  # a copy of the file, edited with bootloader_update: none


def lab_grub_text():
    with open(UBUNTU_TEMPLATE, encoding="utf-8") as handle:
        text = handle.read().replace("@DEFAULT_CMDLINE@", "quiet").replace("@DEFAULT_TIMEOUT@", "5")
    return text.replace('GRUB_CMDLINE_LINUX=""', LAB_GRUB_LINUX)


@pytest.fixture
def host(tmp_path):
    fake = FakeHost(tmp_path)
    fake.set_cpuinfo("GenuineIntel")
    fake.write("/proc/cmdline", LAB_RUNNING)
    put(fake, COPY, lab_grub_text())
    fake.grub = COPY
    return fake


def run(host, check_mode=False, diff=False, commands=None, **args):
    """The module over the tree; ``commands`` answers the programs it runs (none by default)."""
    full = dict(LAB_ARGS, grub_file=host.grub)
    full.update(args)
    injected = Host(host.root, commands=commands if commands is not None else RecordedCommands())
    return run_module(iommu_grub.main, full, check_mode=check_mode, diff=diff, host=injected)


def put(host, path, text):
    """A file of the tree, byte for byte."""
    real = host.p(path)
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "w", encoding="utf-8") as handle:
        handle.write(text)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def read_grub(host, path=None):
    return read(host.p(path or host.grub))


def test_lab_converges_then_reports_nothing(host):
    before = read_grub(host)
    result = run(host, diff=True)
    assert result["changed"] is True and result["reboot_required"] is True
    assert result["vendor"] == "intel"
    assert result["args"] == ["console=ttyS0,115200n8", "intel_iommu=on", "iommu=pt", "pci-stub.ids=1234:11e8"]
    assert result["args_missing"] == ["intel_iommu=on", "iommu=pt", "pci-stub.ids=1234:11e8"]
    assert result["args_unwanted"] == ["intel_iommu=off"]
    after = read_grub(host)
    assert after == before.replace(LAB_GRUB_LINUX, 'GRUB_CMDLINE_LINUX="%s"' % result["cmdline"])
    assert result["diff"][0]["before"] == before and result["diff"][0]["after"] == after
    assert result["diff"][0]["before_header"] == COPY
    # Re-run before the reboot: nothing to write, but the reboot is still due.
    again = run(host)
    assert again["changed"] is False and again["reboot_required"] is True
    # After the reboot the kernel runs with the new args.
    host.write("/proc/cmdline", LAB_RUNNING.replace("intel_iommu=off", "intel_iommu=on iommu=pt pci-stub.ids=1234:11e8"))
    final = run(host)
    assert final["changed"] is False and final["reboot_required"] is False
    assert final["args_missing"] == [] and final["args_unwanted"] == []


def test_check_mode_changes_nothing(host):
    before = read_grub(host)
    result = run(host, check_mode=True, diff=True)
    assert result["changed"] is True and result["reboot_required"] is True
    assert "intel_iommu=on" in result["diff"][0]["after"]
    assert read_grub(host) == before


def test_backup(host):
    before = read_grub(host)
    result = run(host, backup=True)
    assert result["backup_file"] and read(result["backup_file"]) == before
    assert run(host, backup=True)["backup_file"] is None
    # a second edit within the same second keeps the first backup (the original) and makes its own
    second = run(host, backup=True, args=[{"name": "nomodeset"}])
    assert second["backup_file"] not in (None, result["backup_file"])
    assert read(result["backup_file"]) == before and read(second["backup_file"]) != before


def test_amd_vendor_auto(host):
    host.set_cpuinfo("AuthenticAMD")
    host.write("/proc/cmdline", "ro amd_iommu=off")
    put(host, host.grub, 'GRUB_CMDLINE_LINUX="amd_iommu=off quiet"\n')
    result = run(host)
    assert result["vendor"] == "amd"
    assert read_grub(host) == 'GRUB_CMDLINE_LINUX="quiet iommu=pt pci-stub.ids=1234:11e8"\n'


def test_real_centos_file(host):
    original = read(CENTOS9)
    put(host, host.grub, original)
    host.write("/proc/cmdline", "BOOT_IMAGE=(hd0,gpt2)/vmlinuz ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rhgb quiet")
    result = run(host, vendor="intel", pre_bind_ids=["10de:20b5"], pre_bind_driver="vfio-pci")
    assert result["changed"] is True
    new = read_grub(host)
    assert new.splitlines()[5] == ('GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/cs-swap '
                                   'rd.lvm.lv=cs/root rd.lvm.lv=cs/swap rhgb quiet intel_iommu=on iommu=pt vfio-pci.ids=10de:20b5"')
    assert [l for i, l in enumerate(new.splitlines()) if i != 5] == [l for i, l in enumerate(original.splitlines()) if i != 5]


def test_args_the_other_variable_gives_are_not_added_again(host):
    """GRUB_CMDLINE_LINUX_DEFAULT already says intel_iommu=on iommu=pt (the Proxmox VE wiki's PCI(e)
    Passthrough line): the edit of GRUB_CMDLINE_LINUX does not add them a second time, and says so."""
    put(host, COPY, lab_grub_text().replace('GRUB_CMDLINE_LINUX_DEFAULT="quiet"', 'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"'))
    result = run(host, diff=True)
    assert result["args"] == ["console=ttyS0,115200n8", "pci-stub.ids=1234:11e8"]
    assert result["args_in_other_variable"] == ["intel_iommu=on", "iommu=pt"]
    sourced = subprocess.run(["bash", "-c", '. "$1"; printf %s "$GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT"', "bash", host.p(COPY)],
                             capture_output=True, text=True, check=True).stdout.split()
    assert sourced == ["console=ttyS0,115200n8", "pci-stub.ids=1234:11e8", "quiet", "intel_iommu=on", "iommu=pt"]
    again = run(host)
    assert again["changed"] is False and again["args_in_other_variable"] == ["intel_iommu=on", "iommu=pt"]


# ---------------------------------------------------------------------------- bootloader
def test_update_grub_on_debian(host):
    host.write("/etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
    put(host, GRUB, lab_grub_text())
    commands = RecordedCommands(replies=[(["update-grub"],)])
    result = run(host, commands=commands, grub_file=GRUB, bootloader_update="auto")
    assert result["changed"] is True and commands.calls == [["update-grub"]]
    assert result["bootloader_commands"] == [["/usr/bin/update-grub"]]
    assert run(host, commands=commands, grub_file=GRUB, bootloader_update="auto")["changed"] is False
    assert commands.calls == [["update-grub"]]


def test_failed_update_grub_reports_the_file_change(host):
    """The file was written before update-grub failed: the failure says changed, with the command's output."""
    host.write("/etc/os-release", "ID=debian\n")
    put(host, GRUB, lab_grub_text())
    commands = RecordedCommands(replies=[(["update-grub"], 1, "", "/usr/sbin/grub-probe: error: failed to get canonical path of `overlay'.")])
    result = run(host, commands=commands, grub_file=GRUB, bootloader_update="auto")
    assert result["failed"] and result["changed"] is True and result["rc"] == 1
    assert "command failed (rc=1): update-grub: /usr/sbin/grub-probe: error" in result["msg"]
    assert "intel_iommu=on" in read_grub(host, GRUB)


def test_update_grub_again_when_grub_cfg_is_stale(host):
    """The file already holds the args but grub.cfg does not (an earlier update-grub failed)."""
    host.write("/etc/os-release", "ID=ubuntu\nID_LIKE=debian\n")
    put(host, GRUB, lab_grub_text())
    run(host, grub_file=GRUB)  # writes the file only
    host.write("/boot/grub/grub.cfg", "menuentry 'Debian' {\n\tlinux\t/boot/vmlinuz-6.1.0-28-amd64 root=UUID=x ro "
               "console=ttyS0,115200n8 intel_iommu=off quiet\n}\n")
    commands = RecordedCommands(replies=[(["update-grub"],)])
    result = run(host, commands=commands, grub_file=GRUB, bootloader_update="auto", check_mode=True)
    assert result["changed"] is True and commands.calls == []
    run(host, commands=commands, grub_file=GRUB, bootloader_update="auto")
    assert commands.calls == [["update-grub"]]
    host.write("/boot/grub/grub.cfg", "menuentry 'Debian' {\n\tlinux\t/boot/vmlinuz root=UUID=x ro "
               "console=ttyS0,115200n8 intel_iommu=on iommu=pt pci-stub.ids=1234:11e8 quiet\n}\n")
    assert run(host, commands=commands, grub_file=GRUB, bootloader_update="auto")["changed"] is False


def test_quoted_arg_in_grub_cfg_is_not_stale(host):
    """A value with a blank in quotes (a bbswitch guide's acpi_osi="Windows 2015") is one arg in
    grub.cfg as on the kernel's command line: the converged host runs update-grub no more."""
    host.write("/etc/os-release", "ID=ubuntu\nID_LIKE=debian\n")
    value = 'nogpumanager acpi_osi=! acpi_osi=Linux acpi_osi=\\"Windows 2015\\" pcie_port_pm=off'
    put(host, GRUB, lab_grub_text().replace(LAB_GRUB_LINUX, 'GRUB_CMDLINE_LINUX="%s"' % value))
    run(host, grub_file=GRUB)  # the file only
    line = [l for l in read_grub(host, GRUB).splitlines() if l.startswith("GRUB_CMDLINE_LINUX=")][0]
    sourced = subprocess.run(["bash", "-c", line + '; printf %s "$GRUB_CMDLINE_LINUX"'], capture_output=True, text=True, check=True).stdout
    # what update-grub writes: the value as the shell gives it
    host.write("/boot/grub/grub.cfg", "menuentry 'Ubuntu' {\n\tlinux\t/boot/vmlinuz-6.8.0-41-generic root=UUID=0 ro %s quiet "
               "$vt_handoff\n}\n" % sourced)
    commands = RecordedCommands(replies=[(["update-grub"],)])
    result = run(host, commands=commands, grub_file=GRUB, bootloader_update="auto")
    assert result["changed"] is False and commands.calls == [] and 'acpi_osi="Windows 2015"' in result["args"]


def test_grubby_on_rhel_with_bls(host):
    host.write("/etc/os-release", 'ID="centos"\nID_LIKE="rhel fedora"\n')
    put(host, GRUB, read(CENTOS9))
    commands = RecordedCommands(programs=["grub2-mkconfig"], replies=[(["grubby", "..."],)])
    run(host, commands=commands, grub_file=GRUB, bootloader_update="auto", vendor="intel", args=[{"name": "rhgb", "state": "absent"}])
    assert commands.calls == [["grubby", "--update-kernel=ALL",
                               "--args=intel_iommu=on iommu=pt pci-stub.ids=1234:11e8", "--remove-args=rhgb"]]


def test_grubby_again_when_the_bls_entries_lack_the_args(host):
    """EL8 (entries say options $kernelopts, the args are in grubenv): grubby failed after the file was
    written; the next run finds the entries without the args and runs grubby again, then nothing."""
    host.write("/etc/os-release", ROCKY)
    put(host, GRUB, read(CENTOS9))
    put(host, "/boot/grub2/grubenv", EL8_GRUBENV)
    put(host, "/boot/loader/entries/abc-4.18.0-513.el8.x86_64.conf", EL8_ENTRY)
    wanted = "intel_iommu=on iommu=pt pci-stub.ids=1234:11e8"

    def commands(rc):
        return RecordedCommands(programs=["grubby"], replies=[(["grubby", "..."], rc, "", "grubby: error")])
    failed = run(host, commands=commands(1), grub_file=GRUB, bootloader_update="auto", vendor="intel")
    assert failed["failed"] and wanted in read_grub(host, GRUB)
    again = commands(0)
    result = run(host, commands=again, grub_file=GRUB, bootloader_update="auto", vendor="intel", check_mode=True)
    assert result["changed"] is True and again.calls == []
    result = run(host, commands=again, grub_file=GRUB, bootloader_update="auto", vendor="intel")
    assert result["changed"] is True and again.calls == [["grubby", "--update-kernel=ALL", "--args=" + wanted]]
    put(host, "/boot/grub2/grubenv", EL8_GRUBENV.replace("rhgb quiet ", "rhgb quiet " + wanted))  # what grubby does
    done = commands(0)
    assert run(host, commands=done, grub_file=GRUB, bootloader_update="auto", vendor="intel")["changed"] is False
    assert done.calls == []


@pytest.mark.parametrize("grub_cfg", ["/boot/grub2/grub.cfg", "/boot/efi/EFI/rocky/grub.cfg"])
def test_grub2_mkconfig_without_bls(host, grub_cfg):
    host.write("/etc/os-release", 'ID="rocky"\nID_LIKE="rhel centos fedora"\n')
    host.write(grub_cfg, "# generated\n")
    put(host, GRUB, read(CENTOS9).replace("GRUB_ENABLE_BLSCFG=true", "GRUB_ENABLE_BLSCFG=false"))
    commands = RecordedCommands(replies=[(["grub2-mkconfig", "-o", "..."],)])
    run(host, commands=commands, grub_file=GRUB, bootloader_update="auto", vendor="intel")
    assert commands.calls == [["grub2-mkconfig", "-o", grub_cfg]]


def test_auto_update_refuses_a_copy(host):
    before = read_grub(host)
    result = run(host, bootloader_update="auto")
    assert result["failed"] and "set bootloader_update: none to edit a copy" in result["msg"]
    assert read_grub(host) == before


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("args, message", [
    ({"vendor": "arm"}, "value of vendor must be one of"),
    ({"pre_bind_ids": ["10de-20b5"]}, "pre_bind_ids: '10de-20b5' is not a vendor:device pair"),
    ({"pre_bind_ids": ["zzzz:1"]}, "pre_bind_ids: 'zzzz:1' is not a vendor:device pair"),
    ({"args": [{"name": "quiet"}, {"name": "quiet", "state": "absent"}]}, "quiet is asked both present and absent"),
    ({"args": [{"name": "intel_iommu", "value": "off"}]}, "set by the iommu and vendor option"),
    ({"grub_file": "/nonexistent/grub"}, "grub_file: /nonexistent/grub does not exist"),
    ({"iommu": False, "passthrough": True}, "passthrough: true needs iommu: true"),
])
def test_bad_input_changes_nothing(host, args, message):
    before = read_grub(host)
    result = run(host, **args)
    assert result.get("failed") and message in result["msg"], result
    assert read_grub(host) == before


@pytest.mark.parametrize("content, message", [
    ('GRUB_CMDLINE_LINUX="$EXTRA intel_iommu=off"\n', "built from shell expansion"),
    ('GRUB_CMDLINE_LINUX="a"\nGRUB_CMDLINE_LINUX="b"\n', "sets GRUB_CMDLINE_LINUX 2 times"),
    ('GRUB_CMDLINE_LINUX="intel_iommu=off\n', "unbalanced double quote"),
    ('GRUB_CMDLINE_LINUX=""\nGRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=off"\n', "sets intel_iommu=off in GRUB_CMDLINE_LINUX_DEFAULT"),
    # the other variable built by expansion: its literal words are checked, else it is refused naming the line
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT intel_iommu=off"\n'
     'GRUB_CMDLINE_LINUX=""\n', "line 2 sets intel_iommu=off in GRUB_CMDLINE_LINUX_DEFAULT"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=off `true`"\nGRUB_CMDLINE_LINUX=""\n',
     "line 1 sets intel_iommu=off in GRUB_CMDLINE_LINUX_DEFAULT"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet $(cat /etc/kernel/cmdline)"\nGRUB_CMDLINE_LINUX=""\n',
     "line 1: GRUB_CMDLINE_LINUX_DEFAULT is built from shell expansion ($(cat /etc/kernel/cmdline)), so the args it gives "
     "the kernel cannot be checked against the ones asked here; write it as a plain quoted string (or set variable: "
     "GRUB_CMDLINE_LINUX_DEFAULT)"),
])
def test_unparseable_file_changes_nothing(host, content, message):
    put(host, host.grub, content)
    result = run(host)
    assert result.get("failed") and message in result["msg"], result
    assert read_grub(host) == content


def test_other_variable_appending_to_itself_is_read(host):
    """GRUB_CMDLINE_LINUX_DEFAULT appended to itself (a verity drop-in's line, here in the file): read, not refused."""
    put(host, COPY, lab_grub_text() + 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} iommu=pt"\n')
    result = run(host)
    assert not result.get("failed"), result
    assert result["args_in_other_variable"] == ["iommu=pt"] and "iommu=pt" not in result["args"]


# Ubuntu cloud images' /etc/default/grub.d/50-cloudimg-settings.cfg as the image ships it ("CLOUD_IMG: This file
# was created/modified by the Cloud Image build process"); grub-mkconfig sources it after /etc/default/grub.
CLOUDIMG = ("# Cloud Image specific Grub settings for Generic Cloud Images\n"
            "# CLOUD_IMG: This file was created/modified by the Cloud Image build process\n\n"
            "# Set the recordfail timeout\nGRUB_RECORDFAIL_TIMEOUT=0\n\n# Do not wait on grub prompt\nGRUB_TIMEOUT=0\n\n"
            "# Set the default commandline\n"
            'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0 nvme_core.io_timeout=4294967295"\n\n'
            "# Set the grub console type\nGRUB_TERMINAL=console\nGRUB_HIDDEN_TIMEOUT=0.1\n")
CLOUDIMG_OFF = CLOUDIMG.replace("console=ttyS0 ", "console=ttyS0 intel_iommu=off iommu=soft ")
DROPIN = COPY + ".d/50-cloudimg-settings.cfg"


@pytest.mark.parametrize("dropins, message", [
    ({DROPIN: CLOUDIMG}, None),
    ({DROPIN: CLOUDIMG_OFF}, DROPIN + " line 11 sets intel_iommu=off iommu=soft in GRUB_CMDLINE_LINUX_DEFAULT, against what "
                                      "is asked here; the kernel would get both. Remove them there"),
    # a later drop-in that appends to the cloud image's value
    ({DROPIN: CLOUDIMG, COPY + ".d/99-passthrough.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} iommu=off"\n'},
     COPY + ".d/99-passthrough.cfg line 1 sets iommu=off in GRUB_CMDLINE_LINUX_DEFAULT"),
    # a drop-in whose value cannot be read: refused naming it, its line and the fix
    ({DROPIN: CLOUDIMG.replace('"console=tty1', '"$(cat /etc/cloud-console) console=tty1')},
     DROPIN + " line 11: GRUB_CMDLINE_LINUX_DEFAULT is built from shell expansion ($(cat /etc/cloud-console)), so the args it "
              "gives the kernel cannot be checked against the ones asked here; write it as a plain quoted string"),
    ({DROPIN: CLOUDIMG.replace('4294967295"', "4294967295")}, DROPIN + " line 11: unbalanced double quote"),
], ids=["cloudimg", "cloudimg-iommu-off", "later-append", "expansion", "unbalanced"])
def test_dropins_setting_the_other_variable(host, dropins, message):
    """The other variable as the file and then its drop-ins leave it is checked for conflicts."""
    for path, text in dropins.items():
        put(host, path, text)
    before = read_grub(host)
    result = run(host)
    if message is None:
        assert not result.get("failed") and result["changed"] is True, result
        return
    assert result.get("failed") and message in result["msg"], result
    assert read_grub(host) == before


def test_dropin_overriding_the_variable(host):
    put(host, host.grub + ".d/50-cloudimg-settings.cfg", 'GRUB_CMDLINE_LINUX="console=ttyS0"\n')
    result = run(host)
    assert result["failed"] and "50-cloudimg-settings.cfg sets GRUB_CMDLINE_LINUX again" in result["msg"]


def test_vendor_auto_from_iommu_table(host):
    host.write("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: VirtualApple\n")
    host.write("/sys/firmware/acpi/tables/DMAR", "")
    assert run(host)["vendor"] == "intel"


def test_vendor_auto_unknown(host):
    host.write("/proc/cpuinfo", "processor\t: 0\nBogoMIPS\t: 50.00\n")  # arm64 has no vendor_id line
    result = run(host)
    assert result["failed"] and "set vendor: intel or vendor: amd" in result["msg"]


@pytest.fixture
def world_dir():
    """A directory an unprivileged user can reach (pytest's tmp_path is private to root)."""
    path = tempfile.mkdtemp(prefix="grub-review-")
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


def test_copy_without_root(world_dir):
    """bootloader_update: none on a copy works as an unprivileged user (a review before the change)."""
    uid = 65534 if os.geteuid() == 0 else None  # nobody; or already unprivileged
    work = world_dir
    copy = work / "grub"
    copy.write_text(lab_grub_text(), encoding="utf-8")
    args = work / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"grub_file": str(copy), "bootloader_update": "none",
                                                        "vendor": "intel", "pre_bind_ids": ["1234:11e8"]}}))
    for path in (work, copy, args):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    # The unprivileged user may not reach the test runner's interpreter (under /root):
    # the system python with the venv's pure-python ansible-core on the path does the same.
    site = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]
    # (a runner's Python that has no system twin, such as pyenv's 3.12 on Debian 12, takes the system
    # python3: the module side of ansible-core is pure Python for every target version)
    python = sys.executable if uid is None else (shutil.which("python%d.%d" % sys.version_info[:2], path="/usr/bin:/bin")
                                                 or shutil.which("python3", path="/usr/bin:/bin"))
    if python is None:
        pytest.fail("no system python3 to run the module as an unprivileged user (install python3)")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work),
           "PYTHONPATH": os.pathsep.join([os.path.join(REPO, ".build", "collections")] + site)}

    def drop():
        if uid is not None:
            os.setgid(uid)
            os.setuid(uid)

    done = subprocess.run([python, os.path.join(REPO, "plugins", "modules", "iommu_grub.py"), str(args)],
                          capture_output=True, text=True, env=env, preexec_fn=drop, cwd=str(work), timeout=60, check=False)
    assert done.stdout, done.stderr
    result = json.loads(done.stdout)
    assert result.get("failed") is None, (result, done.stderr)
    assert result["changed"] is True
    assert "intel_iommu=on iommu=pt pci-stub.ids=1234:11e8" in copy.read_text(encoding="utf-8")


def test_no_bootloader_tool(host):
    host.write("/etc/os-release", "ID=debian\n")
    put(host, GRUB, lab_grub_text())
    before = read_grub(host, GRUB)
    result = run(host, grub_file=GRUB, bootloader_update="auto")
    assert result["failed"] and "found neither update-grub nor grub-mkconfig" in result["msg"]
    assert read_grub(host, GRUB) == before
    # Nothing to change: no tool needed.
    run(host, grub_file=GRUB, bootloader_update="none")
    assert run(host, grub_file=GRUB, bootloader_update="auto")["changed"] is False


def test_symlinked_crlf_file_with_appends_is_edited_through_its_target(host):
    """The GRUB file is a link to a CRLF file whose cmdline has a += append: the target is
    edited (the link stays), every other byte is kept, the reported command line is bash's."""
    target = host.p("/srv/real/grub")
    os.makedirs(os.path.dirname(target))
    text = ('# kept\r\nGRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX="console=ttyS0 intel_iommu=off"\r\n'
            'GRUB_CMDLINE_LINUX+=" quiet"\r\n')
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    os.symlink(target, host.p("/srv/link-grub"))
    result = run(host, grub_file="/srv/link-grub")
    assert not result.get("failed"), result
    assert result["cmdline"] == " ".join(result["args"])
    assert os.path.islink(host.p("/srv/link-grub"))
    with open(target, encoding="utf-8", newline="") as handle:
        after = handle.read()
    assert after.startswith("# kept\r\nGRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX=") and "\n" not in after.replace("\r\n", "")
    sourced = subprocess.run(["bash", "-c", 'set -a; . "$1"; printf %s "$GRUB_CMDLINE_LINUX"', "bash", target],
                             capture_output=True, text=True, check=True).stdout
    assert sourced.split() == result["args"]
    assert "quiet" in result["args"] and "intel_iommu=off" not in result["args"]
    assert run(host, grub_file="/srv/link-grub")["changed"] is False


def test_off_then_on_pair_becomes_one_on(host):
    put(host, COPY, 'GRUB_CMDLINE_LINUX="intel_iommu=off quiet intel_iommu=on iommu=off iommu=pt"\n')
    result = run(host)
    assert [a for a in result["args"] if a.startswith("intel_iommu")] == ["intel_iommu=on"]
    assert [a for a in result["args"] if a.startswith("iommu=")] == ["iommu=pt"]


# ---------------------------------------------------------------------------- the early stub driver
# modules.builtin: one module file a line, relative to /lib/modules/RELEASE (the kernel's
# Documentation/kbuild/kbuild.rst, "modules.builtin"); the lab kernel's release.
RELEASE = "6.1.0-28-amd64"
MODULES_LOAD = "/etc/modules-load.d/gpuvirt-prebind.conf"
SOFTDEP = "/etc/modprobe.d/gpuvirt-prebind.conf"
INITRAMFS_MODULES = "/etc/initramfs-tools/modules"
DRACUT = "/etc/dracut.conf.d/gpuvirt-prebind.conf"
# What roles/host_boot wrote with its copy/lineinfile tasks (molecule's boot checks read these).
SOFTDEP_TEXT = ("# Written by gpuvirt.tenancy (host_boot): pci-stub claims the pre-bound devices first.\n"
                "softdep nouveau pre: pci-stub\nsoftdep nvidia pre: pci-stub\nsoftdep nvidiafb pre: pci-stub\n")
EARLY = {"name": "pci-stub", "softdep_for": ["nouveau", "nvidia", "nvidiafb"], "initramfs": True}
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
ROCKY = 'ID="rocky"\nID_LIKE="rhel centos fedora"\n'


def early_host(host, os_release, builtin=None, loaded=False):
    host.write("/proc/sys/kernel/osrelease", RELEASE)
    host.write("/etc/os-release", os_release)
    if builtin is not None:
        put(host, "/lib/modules/%s/modules.builtin" % RELEASE, builtin)
    if loaded:
        os.makedirs(host.p("/sys/module/pci_stub/parameters"))
    return host


@pytest.mark.parametrize("os_release, early, files", [
    (DEBIAN, EARLY, {MODULES_LOAD: "pci-stub\n", SOFTDEP: SOFTDEP_TEXT, INITRAMFS_MODULES: "# initramfs modules\nloop\npci-stub\n"}),
    (ROCKY, EARLY, {MODULES_LOAD: "pci-stub\n", SOFTDEP: SOFTDEP_TEXT, DRACUT: 'force_drivers+=" pci-stub "\n'}),
    (DEBIAN, dict(EARLY, initramfs=False), {MODULES_LOAD: "pci-stub\n", SOFTDEP: SOFTDEP_TEXT}),
    (ROCKY, {"name": "vfio-pci"}, {MODULES_LOAD: "vfio-pci\n"}),
], ids=["debian-initramfs-tools", "rocky-dracut", "no-initramfs", "no-softdep"])
def test_early_driver_files_of_a_module_driver(host, os_release, early, files):
    """A driver that is a module: loaded at boot, before the GPU drivers, from the initramfs
    where asked; a reboot is due until it runs. The re-run writes nothing."""
    early_host(host, os_release, builtin="kernel/drivers/block/loop.ko\n")
    put(host, INITRAMFS_MODULES, "# initramfs modules\nloop")  # no newline at the end: one is added
    result = run(host, diff=True, early_driver=early)
    assert result["changed"] is True
    state = result["early_driver"]
    assert state["builtin"] is False and state["loaded"] is False and state["reboot_required"] is True
    assert state["in_initramfs"] is early.get("initramfs", False)
    assert state["files"] == {path: {"changed": True} for path in files}
    for path, text in files.items():
        assert read(host.p(path)) == text, path
    assert {d["before_header"] for d in result["diff"]} == set(files) | {COPY}
    again = run(host, early_driver=early)
    assert again["changed"] is False and again["early_driver"]["files"] == {path: {"changed": False} for path in files}
    assert again["early_driver"]["reboot_required"] is True  # still not running: the reboot loads it


@pytest.mark.parametrize("builtin, loaded, files, reboot", [
    ("kernel/drivers/pci/pci-stub.ko\n", True, {}, False),                    # built in: nothing to write
    ("kernel/drivers/block/loop.ko\n", True, {MODULES_LOAD: {"changed": False}}, False),  # a module, loaded
    ("kernel/drivers/pci/pci_stub.ko.xz\n", False, {}, True),                 # built in, compressed name, - as _
    (None, False, {MODULES_LOAD: {"changed": False}}, True),                  # no modules.builtin: a module
], ids=["builtin", "loaded-module", "builtin-other-spelling", "no-builtin-list"])
def test_early_driver_built_in_or_running(host, builtin, loaded, files, reboot):
    early_host(host, DEBIAN, builtin=builtin, loaded=loaded)
    put(host, MODULES_LOAD, "pci-stub\n")
    result = run(host, early_driver={"name": "pci-stub"})
    assert result["early_driver"]["files"] == files
    assert result["early_driver"]["reboot_required"] is reboot and result["early_driver"]["loaded"] is loaded
    assert result["changed"] is True  # the GRUB edit of the lab file; the early files are as wanted
    assert not os.path.exists(host.p(SOFTDEP))


def test_early_driver_check_mode_writes_nothing(host):
    early_host(host, DEBIAN)
    result = run(host, check_mode=True, diff=True, early_driver=EARLY)
    assert result["changed"] is True and result["early_driver"]["files"][MODULES_LOAD] == {"changed": True}
    assert [d["after"] for d in result["diff"] if d["before_header"] == SOFTDEP] == [SOFTDEP_TEXT]
    assert not any(os.path.exists(host.p(p)) for p in (MODULES_LOAD, SOFTDEP, INITRAMFS_MODULES))


def test_early_driver_alone_changes_the_result(host):
    """A GRUB file already as wanted: the early driver's file alone makes the change."""
    early_host(host, DEBIAN, builtin="")
    run(host)
    result = run(host, early_driver={"name": "pci-stub"})
    assert result["changed"] is True and result["bootloader_commands"] == []
    assert read(host.p(MODULES_LOAD)) == "pci-stub\n"
    assert run(host, early_driver={"name": "pci-stub"})["changed"] is False
    assert run(host)["early_driver"] is None


@pytest.mark.parametrize("early, message", [
    ({"name": "pci stub"}, "early_driver.name: 'pci stub' is not a kernel module name"),
    ({"name": "pci-stub", "softdep_for": ["nouveau;reboot"]}, "early_driver.softdep_for: 'nouveau;reboot'"),
])
def test_early_driver_bad_names_change_nothing(host, early, message):
    early_host(host, DEBIAN)
    before = read_grub(host)
    result = run(host, early_driver=early)
    assert result["failed"] and message in result["msg"], result["msg"]
    assert read_grub(host) == before and not os.path.exists(host.p(MODULES_LOAD))


# ---- the hugepages in the same call (hugepages): one round trip for the boot stage

NODE2M = "/sys/devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages"
NODE1G = "/sys/devices/system/node/node%d/hugepages/hugepages-1048576kB/nr_hugepages"


@pytest.fixture
def numa_host(host):
    """The lab layout with its two 2048 MB NUMA nodes and a kernel that reads per-node boot sizes."""
    host.write("/proc/sys/kernel/osrelease", "6.1.0-28-amd64")
    host.add_numa_node(0, [0, 1], memory_mb=2048)
    host.add_numa_node(1, [2, 3], memory_mb=2048)
    return host


def test_hugepages_now_and_at_boot_in_the_one_grub_edit(numa_host):
    pages = {"pages": [{"size": "2M", "count": 64, "node": 1}, {"size": "1G", "count": 1, "node": 0}], "at_boot": ["1G"]}
    first = run(numa_host, diff=True, hugepages=pages)
    assert first["changed"] and first["hugepages"]["changed"]
    assert read(numa_host.p(NODE2M % 1)).strip() == "64"
    assert read(numa_host.p(NODE1G % 0)).strip() == "0"   # a boot size: on the command line, not set now
    line = [l for l in read_grub(numa_host).splitlines() if l.startswith("GRUB_CMDLINE_LINUX=")][0]
    assert "hugepagesz=1G hugepages=0:1" in line and "intel_iommu=on" in line
    assert {"name": "hugepagesz", "value": "1G", "state": "present"} in first["hugepages"]["boot_args"]
    assert any(d["after"] == "%s: 64\n" % (NODE2M % 1) for d in first["diff"])
    again = run(numa_host, hugepages=pages)
    assert again["changed"] is False and again["hugepages"]["changed"] is False


def test_hugepages_in_check_mode_change_nothing(numa_host):
    before = read_grub(numa_host)
    result = run(numa_host, check_mode=True, hugepages={"pages": [{"size": "2M", "count": 64, "node": 0}]})
    assert result["changed"] and result["hugepages"]["changed"]
    assert read(numa_host.p(NODE2M % 0)).strip() == "0" and read_grub(numa_host) == before


@pytest.mark.parametrize("pages, words", [
    ({"pages": [{"size": "4M", "count": 1}]}, ["hugepages:", "4M", "gpuvirt.tenancy.hugepages"]),
    ({"pages": [{"size": "2M", "count": 1}], "grub_file": "/etc/default/grub"}, ["hugepages:", "grub_file"]),
    ({"pages": [{"size": "2M", "count": 1, "node": 7}]}, ["node 7"]),
])
def test_bad_hugepages_change_nothing(numa_host, pages, words):
    before = read_grub(numa_host)
    result = run(numa_host, hugepages=pages)
    assert result["failed"] and not result.get("changed")
    for word in words:
        assert word in result["msg"]
    assert read_grub(numa_host) == before and read(numa_host.p(NODE2M % 0)).strip() == "0"


def test_a_bad_grub_arg_stops_the_hugepages_too(numa_host):
    result = run(numa_host, hugepages={"pages": [{"size": "2M", "count": 64, "node": 0}]},
                 args=[{"name": "bad name"}])
    assert result["failed"] and not result.get("changed")
    assert read(numa_host.p(NODE2M % 0)).strip() == "0"


# ---------------------------------------------------------------------------- two calls at once
HOLD_S = 0.3  # how long each call waits between deciding and writing: the other call decides meanwhile unless kept out
ONE_EACH = ({"name": "nmi_watchdog", "value": "0"}, {"name": "mitigations", "value": "off"})


def _hold_back_grub_writes(without_lock):
    """In this (forked) process: every GRUB write waits HOLD_S after its call decided; ``without_lock``:
    the root lock of iommu_grub and hugepages made a no-op, to show what the lock prevents."""
    import contextlib  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import bootloader, grub  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages as pages_utils  # pylint: disable=import-outside-toplevel
    apply = bootloader.GrubCmdlineEdit.apply

    def held_back(self, run_, backup=False):
        time.sleep(HOLD_S)
        return apply(self, run_, backup=backup)

    bootloader.GrubCmdlineEdit.apply = held_back
    if without_lock:
        grub.root_lock = pages_utils.root_lock = lambda root, what: contextlib.nullcontext()


def _in_a_process(call, start, without_lock):
    """``call`` (a module call, -> its result) once every process is ready, its GRUB write held back
    (:func:`_hold_back_grub_writes`); it must change the file and not fail."""
    _hold_back_grub_writes(without_lock)
    start.wait()
    result = call()
    assert result["changed"] and not result.get("failed"), result


def _at_once(calls, without_lock):
    """Each of ``calls`` in a process of its own (forked), all started together."""
    import multiprocessing  # pylint: disable=import-outside-toplevel
    context = multiprocessing.get_context("fork")
    start = context.Barrier(len(calls))
    processes = [context.Process(target=_in_a_process, args=(call, start, without_lock)) for call in calls]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    assert [process.exitcode for process in processes] == [0] * len(calls)


def _two_calls_at_once(host, without_lock=False):
    """Two iommu_grub calls, each adding one arg of ONE_EACH, started together; -> the args of the
    GRUB variable after both."""
    _at_once([functools.partial(run, host, args=[arg]) for arg in ONE_EACH], without_lock)
    return run(host, check_mode=True)["args"]


def _lost(args):
    return [a for a in ("nmi_watchdog=0", "mitigations=off") if a not in args]


@pytest.mark.parametrize("round_", range(6))
def test_two_calls_at_once_on_one_root_lose_no_arg(host, round_):
    """Each call decides from the file and writes it back: without a lock the second write drops the
    first call's arg (shown below); with it the second call decides from what the first wrote."""
    args = _two_calls_at_once(host)
    assert not _lost(args), (round_, args)
    assert run(host, args=[dict(a) for a in ONE_EACH])["changed"] is False


def test_without_the_root_lock_two_calls_at_once_lose_an_arg(host):
    """The control of the test above: the same two calls with the lock made a no-op lose one arg (in
    at least one of three rounds; each round starts from the lab file again)."""
    before = read_grub(host)
    losses = []
    for _round in range(3):
        put(host, COPY, before)
        losses.append(_lost(_two_calls_at_once(host, without_lock=True)))
    assert any(losses), losses


def test_a_call_that_waits_too_long_for_the_lock_fails_and_changes_nothing(host, monkeypatch):
    import fcntl  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import locks  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(locks, "WAIT_S", 0.2)
    before = read_grub(host)
    holder = os.open(host.root, os.O_RDONLY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another call on the same root, still running
        result = run(host, args=[dict(ONE_EACH[0])])
    finally:
        os.close(holder)
    assert result["failed"] and not result.get("changed"), result
    assert result["msg"] == ("iommu_grub: another call on root %s has held its lock for 0.2 s (a GRUB edit runs one call at a "
                             "time per root); nothing was changed. Wait for that call to end and run again" % host.root)
    assert read_grub(host) == before
    assert run(host, args=[dict(ONE_EACH[0])])["changed"] is True  # the lock is free again


def _grub_and_hugepages_at_once(host, without_lock=False):
    """An iommu_grub call adding nmi_watchdog=0 and a hugepages call reserving 1 GiB at boot on node
    1, editing the one GRUB file, started together; -> its GRUB_CMDLINE_LINUX line after both."""
    from ansible_collections.gpuvirt.tenancy.plugins.modules import hugepages as pages_module  # pylint: disable=import-outside-toplevel
    pages = {"pages": [{"size": "1G", "count": 1, "node": 1}], "boot_config": "grub", "grub_file": host.grub,
             "bootloader_update": "none"}
    _at_once([functools.partial(run, host, args=[dict(ONE_EACH[0])]),
              functools.partial(run_module, pages_module.main, pages, host=Host(host.root, commands=RecordedCommands()))],
             without_lock)
    return [line for line in read_grub(host).splitlines() if line.startswith("GRUB_CMDLINE_LINUX=")][0]


def _lost_of_both(line):
    return [arg for arg in ("nmi_watchdog=0", "hugepagesz=1G hugepages=1:1") if arg not in line]


@pytest.mark.parametrize("round_", range(4))
def test_hugepages_and_iommu_grub_at_once_on_one_root_lose_nothing(numa_host, round_):
    """hugepages takes the same root lock as iommu_grub (both read, decide and write the GRUB file):
    started together, the second decides from what the first wrote and both edits stay."""
    line = _grub_and_hugepages_at_once(numa_host)
    assert not _lost_of_both(line), (round_, line)


def test_without_the_root_lock_hugepages_and_iommu_grub_at_once_lose_an_edit(numa_host):
    """The control of the test above: with both locks made a no-op, one edit is lost (in at least one
    of three rounds, each from the lab file again)."""
    before = read_grub(numa_host)
    losses = []
    for _round in range(3):
        put(numa_host, COPY, before)
        losses.append(_lost_of_both(_grub_and_hugepages_at_once(numa_host, without_lock=True)))
    assert any(losses), losses


# ---------------------------------------------------------------------------- one run converges
def _ubuntu_with(first, append):
    text = lab_grub_text().replace(LAB_GRUB_LINUX, 'GRUB_CMDLINE_LINUX="%s"' % first)
    return text.replace('GRUB_CMDLINE_LINUX="%s"\n' % first, 'GRUB_CMDLINE_LINUX="%s"\nGRUB_CMDLINE_LINUX+="%s"\n' % (first, append))


def _centos_with(first, append):
    text = read(CENTOS9)
    line = [ln for ln in text.splitlines() if ln.startswith("GRUB_CMDLINE_LINUX=")][0]
    return text.replace(line, '%s\nGRUB_CMDLINE_LINUX+="%s"' % (line[:-1] + " " + first + '"', append))


@pytest.mark.parametrize("text", [
    _ubuntu_with("console=ttyS0,115200n8 iommu=nopt", " intel_iommu=off"),
    _ubuntu_with("iommu=nopt", " intel_iommu=off quiet"),
    _ubuntu_with("intel_iommu=off", " iommu=nopt"),
    _centos_with("iommu=nopt", " intel_iommu=off"),
    _centos_with("intel_iommu=on iommu=nopt", " intel_iommu=off"),
    # the append written as a CRLF line, then a second append
    _centos_with("iommu=nopt", " intel_iommu=off").replace('intel_iommu=off"\n', 'intel_iommu=off"\r\n') + 'GRUB_CMDLINE_LINUX+=" quiet"\n',
], ids=["ubuntu", "ubuntu-append-keeps-quiet", "ubuntu-nopt-appended", "centos", "centos-on-then-off", "centos-crlf-two-appends"])
def test_nopt_and_an_appended_iommu_off_converge_in_one_run(host, text):
    """``iommu=nopt`` in the assignment and ``intel_iommu=off`` added by ``+=`` (the real Ubuntu and CentOS Stream 9
    files): one run gives the file bash reads as the wanted args, and the next run has nothing to do."""
    put(host, COPY, text)
    first = run(host)
    assert first["changed"] and not first.get("failed"), first
    sourced = subprocess.run(["bash", "-c", 'set -a; . "$1"; printf %s "$GRUB_CMDLINE_LINUX"', "bash", host.p(COPY)],
                             capture_output=True, text=True, check=True).stdout
    assert sourced.split() == first["args"]
    assert "intel_iommu=on" in first["args"] and "iommu=pt" in first["args"]
    assert not [a for a in first["args"] if a in ("intel_iommu=off", "iommu=nopt")]
    assert [a for a in text.split() if a == "rhgb"] == [a for a in first["args"] if a == "rhgb"]
    again = run(host)
    assert again["changed"] is False and again["args"] == first["args"]
