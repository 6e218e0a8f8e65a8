# -*- coding: utf-8 -*-
"""The gpu_mps role and playbooks/gpu_sharing.yml run by ansible-playbook on localhost in
check mode, against tests/unit/fakes/standins/nvidia-smi (a STAND-IN for nvidia-smi; see its
docstring). Nothing here touches systemd or /etc: check mode, and the conflicts fail
before any write."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from conftest import REPO_ROOT  # pylint: disable=import-error
from fakes.mig import STANDIN, gpu, h100_fixture_layout  # pylint: disable=import-error
from fakes.playbook_run import run_playbook  # pylint: disable=import-error

ROLE_PLAY = """
- name: Run {role}
  hosts: localhost
  gather_facts: false
  roles:
    - role: gpuvirt.tenancy.{role}
"""
PLAY = ROLE_PLAY.format(role="gpu_mps")


def playbook(tmp_path, gpus, extra_vars, play=PLAY, inventory=None, check=True):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"gpus": gpus}))
    (tmp_path / "play.yml").write_text(play)
    argv = [str(tmp_path / "play.yml"), "-e", json.dumps(extra_vars)]
    argv += ["-i", inventory] if inventory else ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable]
    if check:
        argv += ["--check", "--diff"]
    rc, out, records = run_playbook(argv, tmp_path, env={"NVIDIA_SMI_STANDIN_STATE": str(state)})
    calls = json.loads(state.read_text()).get("calls", []) if state.exists() else []
    return rc, Run(out, records), calls


class Run:
    """ansible-playbook's output and every task result it recorded."""

    def __init__(self, text, records):
        self.text = text
        self.records = records

    def __str__(self):
        return self.text

    __repr__ = __str__

    def task(self, name):
        found = [r["result"] for r in self.records if r["task"] == name]
        if not found:
            raise AssertionError("task %r did not run:\n%s" % (name, self.text))
        return found

    def stats(self, host):
        match = re.search(r"^%s\s*: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)" % re.escape(host),
                          self.text, flags=re.M)
        assert match, self.text
        return dict(zip(("ok", "changed", "unreachable", "failures", "skipped"), map(int, match.groups())))


def task_results(result, name):
    return result.task(name)


def base_vars(**mps):
    values = {"gpus": "all", "active_thread_percentage": 50, "pinned_memory_limit": "20G"}
    values.update(mps)
    return {"gpuvirt_mps": values, "gpu_mps_nvidia_smi": STANDIN, "gpu_mps_control": "/bin/true"}


def test_host_without_nvidia_gpu_is_skipped_with_a_message(tmp_path):
    rc, result, _calls = playbook(tmp_path, [], dict(base_vars(), gpu_mps_nvidia_smi=str(tmp_path / "no-nvidia-smi")))
    assert rc == 0, result
    msg = task_results(result, "Say why MPS is skipped on a host without an NVIDIA GPU")[0]["msg"]
    assert "no NVIDIA GPU answers here" in msg and "nothing was changed" in msg
    assert result.stats("localhost")["changed"] == 0


def test_gpu_in_mig_mode_is_refused(tmp_path):
    rc, result, _calls = playbook(tmp_path, [h100_fixture_layout()], base_vars())
    assert rc != 0
    failed = task_results(result, "Refuse GPUs that cannot host a whole-GPU MPS daemon")[0]
    assert "refusing GPU(s) 0" in failed["msg"] and "MIG Enabled" in failed["msg"]


def test_exclusive_process_gpu_held_by_another_process_is_refused_or_skipped(tmp_path):
    busy = gpu("NVIDIA H100 PCIe", "00000000:01:00.0", compute_mode="Exclusive_Process", processes=[{"pid": 31, "name": "python3"}])
    free = gpu("NVIDIA H100 PCIe", "00000000:02:00.0", compute_mode="Exclusive_Process")
    rc, result, _calls = playbook(tmp_path, [busy, free], base_vars())
    assert rc != 0
    assert "compute mode Exclusive_Process" in task_results(result, "Refuse GPUs that cannot host a whole-GPU MPS daemon")[0]["msg"]
    rc, result, _calls = playbook(tmp_path, [busy, free], dict(base_vars(), gpu_mps_fail_on_conflict=False))
    env_files = task_results(result, "Write each GPU's MPS environment (devices, pipes, logs, client defaults)")[0]["results"]
    assert [r["__gpu_mps_gpu"]["index"] for r in env_files] == ["1"]


def test_env_file_carries_per_tenant_limits(tmp_path):
    # No systemd in the unit-test container: the play stops at the restart handler; the
    # environment file it would write is what is checked here.
    _rc, result, _calls = playbook(tmp_path, [gpu("NVIDIA H100 PCIe", "00000000:01:00.0"), gpu("A100-SXM4-40GB", "00000000:36:00.0")],
                                   base_vars(gpus=[1], active_thread_percentage=33, pinned_memory_limit="8G"))
    env_files = task_results(result, "Write each GPU's MPS environment (devices, pipes, logs, client defaults)")[0]["results"]
    assert len(env_files) == 1, env_files
    after = env_files[0]["diff"][0]["after"]
    for line in ("CUDA_VISIBLE_DEVICES=1", "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps/gpu1", "CUDA_MPS_LOG_DIRECTORY=/var/log/nvidia-mps/gpu1",
                 "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=33", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=8G"):
        assert line in after.splitlines(), after


@pytest.mark.parametrize("mps, text", [
    ({"active_thread_percentage": 150}, "active_thread_percentage 1-100"),
    ({"gpus": [5]}, "names GPUs this host does not have"),
])
def test_bad_input_fails_naming_it(tmp_path, mps, text):
    rc, result, _calls = playbook(tmp_path, [gpu("NVIDIA H100 PCIe", "00000000:01:00.0")], base_vars(**mps))
    assert rc != 0 and text in str(result)


def test_gpu_sharing_play_in_the_lab_changes_nothing_and_contacts_no_guest(tmp_path):
    inventory = tmp_path / "hosts.yml"
    # Unroutable guests (TEST-NET-1): the play must not need to reach them when nothing is set.
    inventory.write_text("gpuvirt_guests:\n  hosts:\n    tenant-a: {ansible_host: 192.0.2.1}\n    tenant-b: {ansible_host: 192.0.2.2}\n")
    with open(os.path.join(REPO_ROOT, "playbooks", "gpu_sharing.yml"), "r", encoding="utf-8") as handle:
        play = handle.read()
    rc, result, _calls = playbook(tmp_path, [], {}, play=play, inventory=str(inventory), check=False)
    assert rc == 0, result
    for host in ("tenant-a", "tenant-b"):
        stats = result.stats(host)
        # the parts of the play (guest_nvlink and its reboot line, roles gpu_mig and gpu_mps) are skipped
        assert stats["changed"] == 0 and stats["failures"] == 0 and stats["unreachable"] == 0 and stats["skipped"] == 4, stats


def test_gpu_sharing_play_runs_mig_profile_in_check_mode(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpuvirt_guests:\n  hosts:\n    tenant-a: {ansible_connection: local, ansible_python_interpreter: '%s'}\n"
                         % sys.executable)
    with open(os.path.join(REPO_ROOT, "playbooks", "gpu_sharing.yml"), "r", encoding="utf-8") as handle:
        play = handle.read()
    layout = [{"devices": "all", "mig_enabled": True, "mig_devices": {"3g.40gb": 1, "1g.10gb": 3}}]
    rc, result, calls = playbook(tmp_path, [gpu("NVIDIA H100 PCIe", "00000000:01:00.0")],
                                 {"gpuvirt_mig_layout": layout, "gpu_mig_nvidia_smi": STANDIN},
                                 play=play, inventory=str(inventory))
    assert rc == 0, result
    mig = task_results(result, "Apply the MIG layout")[0]
    assert mig["changed"] and mig["plan"][0] == "GPU 0: enable MIG mode" and len(mig["plan"]) == 5
    assert not any(c[:1] == ["-i"] or "-cgi" in c for c in calls)
    # check mode: a mode change is predicted, no reboot is due (the role's reboot contract)
    due = task_results(result, "Tell whether a reboot is still due")[0]
    assert due["ansible_facts"]["gpu_mig_reboot_required"] is False


MIG_PLAY = ROLE_PLAY.format(role="gpu_mig")


def test_gpu_mig_says_a_pending_mode_change_waits_for_a_reboot_it_may_not_make(tmp_path):
    # the A100 of the stand-in keeps a mode change pending until a reset, as the driver 450 capture shows;
    # reset never and no reboot allowed: the change is made, the reboot is due, nothing reboots
    layout = [{"devices": "all", "mig_enabled": True, "mig_devices": {"3g.20gb": 2}}]
    rc, result, calls = playbook(tmp_path, [gpu("A100-SXM4-40GB", "00000000:36:00.0")],
                                 {"gpuvirt_mig_layout": layout, "gpu_mig_nvidia_smi": STANDIN, "gpuvirt_mig_reset": "never"},
                                 play=MIG_PLAY, check=False)
    assert rc == 0, result
    assert any("-mig" in call for call in calls) and not any("--gpu-reset" in call for call in calls)
    due = task_results(result, "Tell whether a reboot is still due")[0]
    assert due["ansible_facts"]["gpu_mig_reboot_required"] is True
    said = task_results(result, "Report MIG mode changes that wait for a reboot")[0]["msg"]
    assert said == "MIG mode change pending on ['00000000:36:00.0']; reboot the tenant"
    assert task_results(result, "Check that no MIG mode change waits after the reboot")[0]["false_condition"] == "gpu_mig_reboot_ok | bool"
