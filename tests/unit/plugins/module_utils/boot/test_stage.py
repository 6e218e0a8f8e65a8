# -*- coding: utf-8 -*-
"""The boot stage in one iommu_grub call on the DGX A100-class host (fakes.servers: 8 A100 on
nvidia, ConnectX-6 PFs), as a bare host from the factory: the NVIDIA host stack kept off the
tenants' GPUs (modprobe.d, daemons, blacklist args, initramfs), the ConnectX firmware set for
SR-IOV by the mlxconfig STAND-IN (tests/unit/fakes/standins/mlxconfig: real output formats,
firmware state in a file) and loaded by a firmware reset (mlxfwreset's output is not parsed: a
reply whose effect moves Next Boot to Current, as the reset does), the link type of VPI ports an
explicit input. `systemctl show` answers in its documented Key=Value form (systemctl(1), show),
`lsinitramfs` one path a line, as lsinitramfs(8) lists an image."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import stage as boot_stage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.modules import iommu_grub, preflight_info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.systemd import units_by_id
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from conftest import run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands, Reply  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.paths import STANDINS  # pylint: disable=import-error
from fakes.rdma import BOOLEAN  # pylint: disable=import-error
from fakes.servers import build_dgx_a100_class  # pylint: disable=import-error

OS_RELEASE = 'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n'
GRUB = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX=""\n'
RELEASE = "5.15.0-91-generic"
SYSTEMCTL_SHOW = ("Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\n"
                  "Id=nvidia-fabricmanager.service\nLoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n\n"
                  "Id=nvidia-dcgm.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n\n"
                  "Id=dcgm.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n")
LISTING = "usr/lib/modules/%s/kernel/drivers/pci/pci-stub.ko\netc/modprobe.d/alsa-base.conf\n" % RELEASE


def link_param(value):
    return {"default": "IB(1)", "current": value, "next": value, "choices": {"IB": 1, "ETH": 2, "VPI": 3}}


class RecordedWithMlxconfig(RecordedCommands):
    """RecordedCommands, with mlxconfig run for real: the stand-in over its state file."""

    def __init__(self, state, replies=()):
        super().__init__(programs=("mlxconfig", "systemctl", "update-grub", "lsinitramfs", "update-initramfs"),
                         replies=replies)
        self.state = state

    def run(self, argv, check=True, data=None):
        if argv[0].rsplit("/", 1)[-1] != "mlxconfig":
            return super().run(argv, check=check, data=data)
        self.calls.append(["mlxconfig"] + list(argv[1:]))
        proc = subprocess.run([os.path.join(STANDINS, "mlxconfig")] + list(argv[1:]), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, check=False,
                              env=dict(os.environ, MLXCONFIG_STANDIN_STATE=self.state))
        return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def dgx(tmp_path):
    root = tmp_path / "root"
    host, gpus, nics = build_dgx_a100_class(str(root))
    host.write("/etc/os-release", OS_RELEASE)
    host.write("/etc/default/grub", GRUB)
    host.write("/proc/sys/kernel/osrelease", RELEASE + "\n")
    pf = sorted(a for a in nics.values() if os.path.exists(host.p(host.pci_paths[a] + "/sriov_totalvfs")))[0]
    state = tmp_path / "fw.json"
    state.write_text(json.dumps({"devices": {pf: {"device_type": "ConnectX6", "params": [
        ["SRIOV_EN", {"default": "False(0)", "current": "False(0)", "next": "False(0)", "choices": BOOLEAN}],
        ["NUM_OF_VFS", {"default": "0", "current": "0", "next": "0"}],
        ["LINK_TYPE_P1", link_param("IB(1)")], ["LINK_TYPE_P2", link_param("IB(1)")],
    ]}}}))
    return {"host": host, "root": str(root), "gpus": sorted(gpus.values()), "pf": pf, "state": str(state)}


def power_cycle(state):
    data = json.loads(open(state, encoding="utf-8").read())
    for dev in data["devices"].values():
        for _name, param in dev["params"]:
            param["current"] = param["next"]
    with open(state, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def commands_for(dgx, reset_loads=True):
    replies = [
        Reply(["systemctl", "show", "..."], 0, SYSTEMCTL_SHOW),
        Reply(["systemctl", "disable", "--now", "..."]),
        Reply(["update-grub"]),
        Reply(["lsinitramfs", "/boot/initrd.img-%s" % RELEASE], 0, LISTING),
        # each long step takes a while, so that the seconds the result gives can be checked
        Reply(["update-initramfs", "-u", "-k", RELEASE], effect=lambda _argv: time.sleep(0.2)),
        Reply(["mlxfwreset", "-d", "*", "--level", "3", "-y", "reset"],
              effect=lambda _argv: (time.sleep(0.3), power_cycle(dgx["state"]) if reset_loads else None)),
    ]
    commands = RecordedWithMlxconfig(dgx["state"], replies)
    commands.programs.add("mlxfwreset")
    return commands


def options(dgx, link_type="eth", reset_ok=True):
    return {"pre_bind_ids": ["10de:20b0"], "bootloader_update": "auto",
            "gpu_stack": {"early_driver": False, "initramfs": True},
            "firmware": {"sriov_pfs": [{"pf": dgx["pf"], "num_vfs": 8, "link_type": link_type}], "reset_ok": reset_ok}}


def run(dgx, args, commands, **kwargs):
    return run_module(iommu_grub.main, args, host=LiveHost(dgx["root"], commands=commands), **kwargs)


def test_a_bare_dgx_host_in_one_call_then_converged(dgx):
    commands = commands_for(dgx)
    first = run(dgx, options(dgx), commands, diff=True)
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] and first["reboot_required"]
    stack = first["gpu_stack"]
    assert stack["active"] and stack["os_family"] == "Debian" and stack["daemons_stopped"] == ["nvidia-persistenced.service"]
    assert "modprobe.blacklist=nouveau,nvidia,nvidia_drm,nvidia_modeset,nvidia_uvm,nvidiafb" in first["cmdline"]
    assert "blacklist nouveau" in open(dgx["host"].p("/etc/modprobe.d/gpuvirt-nvidia-host.conf"), encoding="utf-8").read()
    assert commands.ran("systemctl", "disable", "--now") == [["systemctl", "disable", "--now", "nvidia-persistenced.service"]]
    assert first["initramfs"]["reasons"] == ["/etc/modprobe.d/gpuvirt-nvidia-host.conf changed"]
    assert commands.ran("update-initramfs") and commands.ran("update-grub")
    fw = first["firmware"]
    assert fw["changes"][dgx["pf"]] == {"SRIOV_EN": "True", "NUM_OF_VFS": "8", "LINK_TYPE_P1": "ETH", "LINK_TYPE_P2": "ETH"}
    assert fw["link_type_changes"][dgx["pf"]] == {"port 1": "IB -> ETH", "port 2": "IB -> ETH"}
    assert fw["reset_ran"] == [dgx["pf"]] and fw["pending"] == [] and fw["reset"] == [dgx["pf"]]
    assert first["firmware_pending"] == [] and first["pending"] and "kernel command line" in first["pending"][0]
    # the seconds the long steps took (measured around the commands), for the stage's report line
    assert sorted(first["elapsed_s"]) == ["firmware_reset", "initramfs"]
    assert 0.2 <= first["elapsed_s"]["initramfs"] < 1 and 0.3 <= first["elapsed_s"]["firmware_reset"] < 2
    headers = [d["before_header"] for d in first["diff"]]
    assert "/etc/modprobe.d/gpuvirt-nvidia-host.conf" in headers and "/etc/default/grub" in headers
    # the daemons the call stops are in its diff, as systemctl showed them and as disable --now leaves them
    [daemons] = [d for d in first["diff"] if d["before_header"] == "host daemons (systemctl disable --now)"]
    assert daemons["after"] == "nvidia-persistenced.service: UnitFileState=disabled ActiveState=inactive\n"
    assert daemons["before"].startswith("nvidia-persistenced.service: UnitFileState=enabled ActiveState=")
    # the daemons are now off; the initramfs holds the new file
    commands = commands_for(dgx)
    stopped = SYSTEMCTL_SHOW.replace("ActiveState=active\nUnitFileState=enabled", "ActiveState=inactive\nUnitFileState=disabled")
    commands.replies[0] = Reply(["systemctl", "show", "..."], 0, stopped)
    commands.replies[3] = Reply(["lsinitramfs", "/boot/initrd.img-%s" % RELEASE], 0,
                                LISTING + "etc/modprobe.d/gpuvirt-nvidia-host.conf\n")
    second = run(dgx, options(dgx), commands)
    assert not second.get("failed"), second.get("msg")
    assert second["changed"] is False and second["firmware"]["changes"] == {}
    assert not commands.ran("update-initramfs") and not commands.ran("mlxfwreset") and not commands.ran("update-grub")
    assert "elapsed_s" not in second


def test_the_gate_and_the_boot_stage_it_checks_query_each_connectx_pf_once(dgx):
    """The gate reads the firmware of every ConnectX PF, then checks the boot stage, which reads its
    targets' firmware: one ``mlxconfig -e q`` per PF in the call."""
    commands = commands_for(dgx)
    result = run_module(preflight_info.main, {"stage_checks": {"boot": options(dgx)}},
                        host=LiveHost(dgx["root"], commands=commands))
    assert not result.get("failed"), result.get("msg")
    assert result["stage_checks"]["boot"]["error"] is None and result["stage_checks"]["boot"]["changed"] is True
    queried = [c[2] for c in commands.ran("mlxconfig") if c[-1] == "q"]
    assert dgx["pf"] in queried and sorted(queried) == sorted(set(queried)) == sorted(result["firmware"])
    assert result["stage_checks"]["boot"]["result"]["firmware"]["changes"][dgx["pf"]]["SRIOV_EN"] == "True"


def test_check_mode_plans_everything_and_changes_nothing(dgx):
    before = open(dgx["state"], encoding="utf-8").read()
    commands = commands_for(dgx)
    result = run(dgx, options(dgx), commands, check_mode=True)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] and result["firmware"]["changes"][dgx["pf"]]["SRIOV_EN"] == "True"
    assert result["firmware"]["reset_devices"] == [dgx["pf"]]
    assert open(dgx["state"], encoding="utf-8").read() == before
    assert not os.path.exists(dgx["host"].p("/etc/modprobe.d/gpuvirt-nvidia-host.conf"))
    assert not commands.ran("systemctl", "disable") and not commands.ran("update-initramfs") and not commands.ran("mlxfwreset")
    assert "elapsed_s" not in result


def test_without_reset_the_firmware_waits_for_the_reset_and_says_so(dgx):
    result = run(dgx, options(dgx, reset_ok=False), commands_for(dgx))
    assert result["firmware_pending"] == [dgx["pf"]] and result["cold_boot_required"] == []
    assert "a firmware reset of %s" % dgx["pf"] in result["pending"]


def test_a_reset_that_does_not_load_it_needs_a_cold_boot(dgx):
    result = run(dgx, options(dgx), commands_for(dgx, reset_loads=False))
    assert result["cold_boot_required"] == [dgx["pf"]]
    assert any("COLD BOOT" in m for m in result["firmware"]["messages"])


@pytest.mark.parametrize("link_type, words", [
    (None, ["are not Ethernet", "set link_type: eth", "link_type: keep"]),
    ("ib", ["InfiniBand mode", "GUID per VF", "not built"]),
    ("keep", ["InfiniBand mode"]),
    ("roce", ["link_type 'roce'", "eth, ib, keep"]),
])
def test_vpi_ports_in_ib_mode_need_an_explicit_link_type(dgx, link_type, words):
    before = open(dgx["state"], encoding="utf-8").read()
    commands = commands_for(dgx)
    result = run(dgx, options(dgx, link_type=link_type), commands)
    assert result["failed"] and result["changed"] is False
    for word in words:
        assert word in result["msg"]
    assert open(dgx["state"], encoding="utf-8").read() == before
    assert not os.path.exists(dgx["host"].p("/etc/modprobe.d/gpuvirt-nvidia-host.conf"))
    assert not commands.ran("update-grub")


def test_a_capture_reads_no_program(dgx):
    """Under a capture (root not /) nothing is asked of programs: the firmware and the initramfs say so."""
    commands = RecordedCommands()
    result = run_module(iommu_grub.main, dict(options(dgx), bootloader_update="none"), check_mode=True,
                        host=Host(dgx["root"], commands=commands))
    assert not result.get("failed"), result.get("msg")
    assert result["firmware"]["read"] is False and "capture" in result["firmware"]["messages"][0]
    assert result["initramfs"]["read"] is False and commands.calls == []


def test_a_capture_gives_the_nvidia_services_state_and_nothing_is_stopped(dgx):
    """Under a capture the NVIDIA units' state is the one systemctl showed on the host when it was
    captured (.capture/systemctl-show-nvidia.txt): the enabled and running one is reported as to be
    stopped, no program runs, and a run under the capture stops nothing on this machine."""
    dgx["host"].write("/.capture/systemctl-show-nvidia.txt", SYSTEMCTL_SHOW)
    for check_mode in (True, False):
        commands = RecordedCommands()
        result = run_module(iommu_grub.main, dict(options(dgx), bootloader_update="none"), check_mode=check_mode,
                            host=Host(dgx["root"], commands=commands))
        assert not result.get("failed"), result.get("msg")
        stack = result["gpu_stack"]
        assert stack["daemons_read"] is True and stack["daemons_source"] == "/.capture/systemctl-show-nvidia.txt"
        assert stack["daemons_stopped"] == ["nvidia-persistenced.service"]
        assert not commands.ran("systemctl")
    # a preview shows them in its diff, not only in the stage's verbose result
    result = run_module(iommu_grub.main, dict(options(dgx), bootloader_update="none"), check_mode=True, diff=True,
                        host=Host(dgx["root"], commands=RecordedCommands()))
    assert [(d["before"], d["after"]) for d in result["diff"] if d["before_header"] == "host daemons (systemctl disable --now)"] == [
        ("nvidia-persistenced.service: UnitFileState=enabled ActiveState=active\n",
         "nvidia-persistenced.service: UnitFileState=disabled ActiveState=inactive\n")]


def test_the_daemons_to_stop_are_the_loaded_ones_enabled_or_running():
    units = units_by_id(SYSTEMCTL_SHOW)
    assert sorted(units) == ["dcgm.service", "nvidia-dcgm.service", "nvidia-fabricmanager.service", "nvidia-persistenced.service"]
    assert boot_stage.daemons_to_stop(units, ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm"]) == [
        "nvidia-persistenced.service"]


# -- ATS on the ConnectX cards whose VFs go to GPU tenants ---------------------
ATS_CAPTURE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "mellanox",
                           "mlxconfig-q_grep-ATS_ENABLED_cx7_FRAGMENT_nvaie-inference-guide.txt")


def with_ats_param(dgx):
    """The PF's firmware offers ATS_ENABLED, off, as NVIDIA's guide shows it on a ConnectX-7 (the
    row parsed from the capture: its name and its shown value)."""
    with open(ATS_CAPTURE, encoding="utf-8") as handle:
        rows = list(mlx.parse_rows(handle.read().splitlines(), ["next"]).items())
    assert len(rows) == 1
    name, row = rows[0]
    assert (name, row["next"]) == ("ATS_ENABLED", "False(0)")
    data = json.loads(open(dgx["state"], encoding="utf-8").read())
    data["devices"][dgx["pf"]]["params"].append(
        [name, {"default": row["next"], "current": row["next"], "next": row["next"], "choices": BOOLEAN}])
    with open(dgx["state"], "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def ats_options(dgx, **kwargs):
    args = options(dgx, **kwargs)
    args["firmware"]["ats_pfs"] = [dgx["pf"]]
    return args


def test_ats_is_set_in_the_firmware_plan_and_loaded_with_sriov(dgx):
    with_ats_param(dgx)
    check = run(dgx, ats_options(dgx), commands_for(dgx), check_mode=True, diff=True)
    assert not check.get("failed"), check.get("msg")
    assert check["firmware"]["ats"] == [dgx["pf"]] and check["firmware"]["changes"][dgx["pf"]]["ATS_ENABLED"] == "True"
    [fw_diff] = [d for d in check["diff"] if d["before_header"].startswith("firmware %s" % dgx["pf"])]
    assert "ATS_ENABLED=False(0)\n" in fw_diff["before"] and "ATS_ENABLED=True\n" in fw_diff["after"]
    commands = commands_for(dgx)
    first = run(dgx, ats_options(dgx), commands)
    assert not first.get("failed"), first.get("msg")
    [set_call] = [c for c in commands.ran("mlxconfig") if "set" in c]
    assert "ATS_ENABLED=True" in set_call and "SRIOV_EN=True" in set_call  # one set, one firmware load
    assert first["firmware"]["reset"] == [dgx["pf"]] and first["firmware"]["pending"] == []
    again = run(dgx, ats_options(dgx), commands_for(dgx))
    assert again["firmware"]["changes"] == {} and again["firmware"]["pending"] == []


def test_ats_without_the_firmware_parameter_fails_naming_the_pf_and_sets_nothing(dgx):
    before = open(dgx["state"], encoding="utf-8").read()
    commands = commands_for(dgx)
    result = run(dgx, ats_options(dgx), commands)
    assert result.get("failed") and "firmware.ats_pfs: the firmware of %s does not offer ATS_ENABLED" % dgx["pf"] in result["msg"]
    assert open(dgx["state"], encoding="utf-8").read() == before and not [c for c in commands.ran("mlxconfig") if "set" in c]


def test_ats_on_a_pf_that_wants_no_vfs_is_refused(dgx):
    args = options(dgx)
    args["firmware"]["ats_pfs"] = ["0000:ff:00.0"]
    result = run(dgx, args, commands_for(dgx))
    assert result.get("failed") and "firmware.ats_pfs: 0000:ff:00.0 is not a ConnectX PF of sriov_pfs" in result["msg"]


def test_without_ats_pfs_the_firmware_plan_is_as_before(dgx):
    with_ats_param(dgx)
    result = run(dgx, options(dgx), commands_for(dgx), check_mode=True)
    assert result["firmware"]["ats"] == [] and "ATS_ENABLED" not in result["firmware"]["changes"][dgx["pf"]]


# -- ACS per path ---------------------------------------------------------------
def test_acs_is_decided_from_the_host_model_and_said_where_not_written(dgx):
    args = dict(options(dgx), acs={})
    result = run(dgx, args, commands_for(dgx), check_mode=True, diff=True)
    assert not result.get("failed"), result.get("msg")
    decided = result["acs"]
    # the tenants' GPUs of the GPU stack and the PF of sriov_pfs: the paths under this PF's switch
    assert {p["pf"] for p in decided["paths"]} == {dgx["pf"]} and decided["bridges"] and decided["written"] is False
    assert decided["kernel"] == RELEASE and "config_acs" not in result["cmdline"]
    assert any("has no pci=config_acs=" in w and "Linux 6.11" in w for w in result["warnings"]), result["warnings"]
    dgx["host"].write("/proc/sys/kernel/osrelease", "6.12.0-55-generic\n")
    newer = run(dgx, dict(args, gpu_stack={"early_driver": False, "initramfs": False}), commands_for(dgx), check_mode=True)
    assert newer["acs"]["written"] is False and "config_acs" not in newer["cmdline"]
    assert any(newer["acs"]["arg"] in w and "Linux 6.15" in w for w in newer["warnings"])
    # without acs the call is as before: no decision, no warning of it
    dgx["host"].write("/proc/sys/kernel/osrelease", RELEASE + "\n")
    assert run(dgx, options(dgx), commands_for(dgx), check_mode=True)["acs"] is None


def test_acs_list_is_written_in_single_quotes_from_linux_6_15_and_compared_as_the_kernel_reads_it(dgx):
    dgx["host"].write("/proc/sys/kernel/osrelease", "6.15.0-1-amd64\n")
    args = dict(options(dgx), acs={}, gpu_stack={"early_driver": False, "initramfs": False})
    grub_path = dgx["host"].p("/etc/default/grub")
    check = run(dgx, args, commands_for(dgx), check_mode=True, diff=True)
    assert not check.get("failed"), check.get("msg")
    decided = check["acs"]
    arg, quoted = decided["arg"], "'%s'" % decided["arg"]
    assert decided["written"] is True and len(decided["bridges"]) > 1 and ";" in arg
    assert not any("config_acs" in w for w in check.get("warnings") or [])
    # check mode and diff: the file's word in single quotes, the kernel's arg missing as /proc/cmdline will show it
    assert check["args"][-1] == quoted and arg in check["args_missing"]
    [grub_diff] = [d for d in check["diff"] if d["before_header"] == "/etc/default/grub"]
    assert "config_acs" not in grub_diff["before"] and 'GRUB_CMDLINE_LINUX="%s %s"' % (
        " ".join(check["args"][:-1]), quoted) in grub_diff["after"]
    assert open(grub_path, encoding="utf-8").read() == GRUB
    commands = commands_for(dgx)
    first = run(dgx, args, commands)
    assert not first.get("failed"), first.get("msg")
    assert quoted in open(grub_path, encoding="utf-8").read() and commands.ran("update-grub")
    # the second run: nothing to write, the reboot still owed
    commands = commands_for(dgx)
    again = run(dgx, args, commands)
    assert again["args"] == first["args"] and not commands.ran("update-grub") and again["reboot_required"]
    # after the reboot the kernel has the arg without GRUB's quotes: nothing missing
    dgx["host"].write("/proc/cmdline", "BOOT_IMAGE=/boot/vmlinuz-6.15.0-1-amd64 root=UUID=0 ro %s\n"
                      % " ".join(a if a != quoted else arg for a in first["args"]))
    booted = run(dgx, args, commands_for(dgx), check_mode=True)
    assert (booted["args_missing"], booted["args_unwanted"], booted["reboot_required"]) == ([], [], False)
    # removal: the tenants' GPU far from the PF (another host bridge) leaves no bridge, and the arg goes
    pci = Host(dgx["root"]).topology((), ())["pci_devices"]
    far = [g for g in dgx["gpus"] if pci[g]["root_bus"] != pci[dgx["pf"]]["root_bus"]][0]
    gone = run(dgx, dict(args, acs={"gpus": [far]}), commands_for(dgx), check_mode=True, diff=True)
    assert gone["acs"]["bridges"] == [] and quoted not in gone["args"] and gone["args_unwanted"] == [arg]


def test_acs_list_on_a_rhel_family_host_is_said_not_written(dgx):
    dgx["host"].write("/proc/sys/kernel/osrelease", "6.15.0-1-amd64\n")
    dgx["host"].write("/etc/os-release", 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n')
    grub_path = dgx["host"].p("/etc/default/grub")
    args = dict(options(dgx), acs={}, gpu_stack={"manage": False, "early_driver": False, "initramfs": False},
                bootloader_update="none")
    result = run(dgx, args, commands_for(dgx), check_mode=True)
    assert not result.get("failed"), result.get("msg")
    assert result["acs"]["written"] is False and "config_acs" not in result["cmdline"]
    assert any(result["acs"]["arg"] in w and "RHEL-family host" in w for w in result["warnings"]), result["warnings"]
    assert open(grub_path, encoding="utf-8").read() == GRUB


def test_acs_flags_that_merge_iommu_groups_fail_and_change_nothing(dgx):
    grub = open(dgx["host"].p("/etc/default/grub"), encoding="utf-8").read()
    args = dict(options(dgx), acs={"flags": "1xxxx00"})
    result = run(dgx, args, commands_for(dgx))
    assert result.get("failed") and "acs.flags: 1xxxx00 turns off Source Validation" in result["msg"]
    assert open(dgx["host"].p("/etc/default/grub"), encoding="utf-8").read() == grub
