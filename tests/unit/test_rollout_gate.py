# -*- coding: utf-8 -*-
"""site.yml's rollout gate, run the way AWX runs it (ansible-runner, the workflow survey's
extra vars), on three hosts in three batches (serial 1), without the lab:

- fake-bare: the real capture of the bare lab VM (tests/fixtures/lab/bare.tar), read through a
  local connection; its IOMMU is present (DMAR) but off, which passes the gate with a warning;
- fake-noiommu: the same capture without its ACPI DMAR table and its CPU's hypervisor flag, what
  a host with VT-d off in the BIOS shows: it fails preflight;
- never-reached: an address of TEST-NET-1 (RFC 5737) that no packet reaches; any task on it
  would show as unreachable.

The runs use --check and --tags preflight, so no stage task can run on this machine even if the
gate were wrong. The lab scenario (molecule/default/verify_fleet.yml) runs the same gate with
the lab VM as the first batch and every stage.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
import yaml
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
fleet_runner = pytest.importorskip("fleet_runner")
pytest.importorskip("ansible_runner", reason="ansible-runner is in requirements.txt; run scripts/bootstrap.sh")

BARE = lab_capture("bare")
LAB_GRUB = ('GRUB_DEFAULT=0\nGRUB_TIMEOUT=1\nGRUB_DISTRIBUTOR=Debian\n'
            'GRUB_CMDLINE_LINUX_DEFAULT="mitigations=off no_timer_check panic=10"\n'
            'GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 intel_iommu=off"\n')
WORKFLOW = os.path.join(REPO, "awx", "surveys", "workflow.json")
PREFLIGHT = os.path.join(REPO, "awx", "surveys", "preflight.json")


@pytest.fixture
def fleet(tmp_path):
    # The capture of the earlier lab predates the capture of /etc: it holds neither the GRUB defaults nor
    # /etc/systemd/system, where the boot stage edits and writes (the gate fails a host whose boot stage
    # would refuse its call). Given here as the lab's image has them (lab/build-image.sh).
    bare = tmp_path / "bare"
    shutil.copytree(BARE, bare, symlinks=True)
    (bare / "etc" / "systemd" / "system").mkdir(parents=True, exist_ok=True)
    (bare / "etc" / "default").mkdir(parents=True, exist_ok=True)
    (bare / "etc" / "default" / "grub").write_text(LAB_GRUB, encoding="utf-8")
    noiommu = tmp_path / "noiommu"
    shutil.copytree(bare, noiommu, symlinks=True)
    os.unlink(noiommu / "sys" / "firmware" / "acpi" / "tables" / "DMAR")
    # bare metal with VT-d off in the BIOS: the lab VM's hypervisor CPU flag out too
    cpuinfo = noiommu / "proc" / "cpuinfo"
    cpuinfo.write_text(cpuinfo.read_text(encoding="utf-8").replace(" hypervisor", ""), encoding="utf-8")
    # the fake hosts' boot menu is not this machine's: the boot stage's check builds none
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "host_boot_bootloader_update": "none"}
    inventory = {
        "gpuvirt_hosts": {
            "hosts": {
                "fake-bare": dict(local, gpuvirt_topology_root=str(bare)),
                "fake-noiommu": dict(local, gpuvirt_topology_root=str(noiommu)),
                "never-reached": {"ansible_host": "192.0.2.1", "ansible_connection": "ssh", "ansible_user": "nobody",
                                  "ansible_ssh_common_args": "-o ConnectTimeout=2 -o BatchMode=yes"},
            },
            "vars": {
                "gpuvirt_gpu_pci_ids": ["1234:11e8"], "gpuvirt_nic_pci_ids": ["1b36:0010"], "gpuvirt_gpus": ["0000:82:00.0"],
                "gpuvirt_sriov_pfs": [{"pf": "0000:81:00.0", "num_vfs": 4}],
                "gpuvirt_hugepages": [{"size": "2M", "count": 64, "node": 1}],
                "gpuvirt_tenants": [{"name": "tenant-a", "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64}],
                "gpuvirt_tenant_policy": {"emulator": "vcpus"},
            },
        },
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    return {"inventory": str(path), "reports": tmp_path / "reports", "tmp": tmp_path}


def test_a_host_failing_preflight_stops_the_rollout_at_its_batch(fleet):
    extra = fleet_runner.survey_extravars(WORKFLOW, {"gpuvirt_serial": "1"})
    extra["gpuvirt_preflight_report_dir"] = str(fleet["reports"])
    summary = fleet_runner.run("playbooks/site.yml", fleet["inventory"], extra, check=True, tags="preflight",
                               private_data_dir=str(fleet["tmp"] / "runner"))
    problems = fleet_runner.judge(summary, expect_failed_hosts=["fake-noiommu"], expect_untouched=["never-reached"])
    assert problems == [], json.dumps(summary, indent=1, default=str)
    assert summary["hosts_with_tasks"] == ["fake-bare", "fake-noiommu"]
    [failure] = summary["failed"]
    assert failure["task"] == "Fleet | Stop the rollout"
    assert failure["msg"] == "ROLLOUT STOPPED at the batch fake-noiommu: preflight failed on fake-noiommu (why: above)"
    # why, printed once, a few lines
    [why] = [m["msg"] for m in summary["messages"] if m["task"] == "Fleet | Say why the rollout stops here"]
    assert why[0] == "ROLLOUT STOPPED at the batch fake-noiommu: preflight failed on fake-noiommu"
    assert why[1].startswith("  - iommu: absent") and any("Enable VT-d" in line and "BIOS" in line for line in why)
    assert why[-2:] == ["  earlier batches, done: fake-bare; later batches, not started: never-reached",
                        "  report: %s" % (fleet["reports"] / "fake-noiommu.json")]
    assert sorted(os.listdir(fleet["reports"])) == ["fake-bare.json", "fake-noiommu.json"]
    report = json.loads((fleet["reports"] / "fake-noiommu.json").read_text())
    assert report["status"] == "fail" and report["iommu"]["present"] is False
    assert summary["changed"] == []


@pytest.mark.parametrize("max_fail, goes_on", [(0, False), (50, True)])
def test_max_fail_percentage_of_a_batch(fleet, max_fail, goes_on):
    """Batches of two: fake-bare and fake-noiommu, then never-reached. One failed host of two is
    50 %: the rollout goes on only when more than that is tolerated. (A batch whose hosts all
    fail always ends the play, whatever the percentage: with serial 1, the first failure does.)"""
    extra = fleet_runner.survey_extravars(WORKFLOW, {"gpuvirt_serial": "2", "gpuvirt_max_fail_percentage": max_fail})
    extra["gpuvirt_preflight_report_dir"] = str(fleet["reports"])
    summary = fleet_runner.run("playbooks/site.yml", fleet["inventory"], extra, check=True, tags="preflight",
                               private_data_dir=str(fleet["tmp"] / "runner"))
    assert [e["host"] for e in summary["failed"]] == ["fake-noiommu"]
    if goes_on:
        assert [e["host"] for e in summary["unreachable"]] == ["never-reached"]  # batch 2 was started
    else:
        assert summary["unreachable"] == [] and "never-reached" not in summary["hosts_with_tasks"]
        [why] = [m["msg"] for m in summary["messages"] if m["task"] == "Fleet | Say why the rollout stops here"]
        assert "later batches, not started: never-reached" in why[-2]


def test_preflight_playbook_in_check_mode_reports_every_host(fleet):
    extra = fleet_runner.survey_extravars(PREFLIGHT, {"gpuvirt_hosts_limit": "fake-bare:fake-noiommu"})
    extra["gpuvirt_preflight_report_dir"] = str(fleet["reports"])
    summary = fleet_runner.run("playbooks/preflight.yml", fleet["inventory"], extra, check=True,
                               private_data_dir=str(fleet["tmp"] / "runner"))
    assert fleet_runner.judge(summary, expect_changed=0, expect_failed_hosts=["fake-noiommu"],
                              expect_untouched=["never-reached"]) == []
    [failure] = summary["failed"]
    # one short line: the table printed just above says why and what to fix
    assert failure["msg"] == "PREFLIGHT FAILED on fake-noiommu: iommu (why and what to fix: the report above; %s)" % (
        fleet["reports"] / "fake-noiommu.json"), failure["msg"]
    tables = [m["msg"] for m in summary["messages"] if isinstance(m["msg"], list)]
    noiommu = next(t for t in tables if t[0].startswith("Preflight fake-noiommu"))
    assert any("Enable VT-d" in line and "BIOS" in line for line in noiommu)
    assert max(len(line) for table in tables for line in table) <= 160
    bare = next(t for t in tables if t[0].startswith("Preflight fake-bare"))
    # the IOMMU's arguments are the boot stage's change, said under it and not as a fix by hand
    assert bare[0] == "Preflight fake-bare: WARN (0 failed, 1 warnings, 1 for the boot stage)"
    boot_part = bare[bare.index("Will be fixed by the boot stage (role host_boot):"):]
    boot_part = boot_part[:boot_part.index("What to fix (by hand):")] if "What to fix (by hand):" in boot_part else boot_part
    assert any("the boot stage sets intel_iommu=on iommu=pt" in line for line in boot_part)
    assert not [line for line in bare if "intel_iommu=on" in line and line not in boot_part]
    fleet_lines = [m["msg"] for m in summary["messages"] if m["host"] == "localhost"]
    assert any(line.startswith("fake-noiommu: FAIL") for line in fleet_lines)
    assert any(line.startswith("fake-bare: WARN") for line in fleet_lines)


def artifact_data(summary):
    """What the run handed to set_stats: AWX keeps it as the job's artifacts (and passes it to later
    workflow nodes); ansible-runner records it in the playbook_on_stats event."""
    found = []
    for folder, _dirs, files in os.walk(summary["artifacts"]):
        for name in files:
            if folder.endswith("job_events") and name.endswith(".json"):
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    event = json.load(handle)
                if event.get("event") == "playbook_on_stats":
                    found.append(event["event_data"].get("artifact_data") or {})
    assert len(found) == 1, found
    return found[0]


def test_preflight_reports_reach_the_job_artifacts(fleet):
    """AWX throws away files a job writes on the controller: the preflight role hands each host's
    report to set_stats (gpuvirt_preflight_reports: host -> report, aggregated over the hosts)."""
    extra = fleet_runner.survey_extravars(PREFLIGHT, {"gpuvirt_hosts_limit": "fake-bare:fake-noiommu"})
    extra["gpuvirt_preflight_report_dir"] = str(fleet["reports"])
    summary = fleet_runner.run("playbooks/preflight.yml", fleet["inventory"], extra, check=True,
                               private_data_dir=str(fleet["tmp"] / "runner"))
    reports = artifact_data(summary).get("gpuvirt_preflight_reports") or {}
    assert sorted(reports) == ["fake-bare", "fake-noiommu"]
    assert reports["fake-noiommu"]["status"] == "fail" and reports["fake-noiommu"]["iommu"]["present"] is False
    assert reports["fake-bare"]["status"] == "warn"
    on_disk = json.loads((fleet["reports"] / "fake-bare.json").read_text())
    assert reports["fake-bare"]["failures"] == on_disk["failures"] and reports["fake-bare"]["warnings"] == on_disk["warnings"]
