# -*- coding: utf-8 -*-
"""The guest_rdma role's fleet step (tasks/fleet.yml) in a play of two hosts run by ansible-playbook:
the action rdma_fleet reads every play host's mlx_rocev2 result from hostvars as ansible-core hands
them to an action (the results here are set as facts, in the module's result form: its RETURN and
tests/unit/plugins/plugin_utils/test_rdma.py, where the module makes them); the uniform policy
fails every host with the table, and a per-host policy decides each guest's write."""

from __future__ import annotations

import json
import sys

from fakes.playbook_run import run_playbook  # pylint: disable=import-error


def result(device, index, ipv4):
    return {"changed": False, "rdma_device": device, "port": 1, "roce_v2_ipv4_index": {device: {"1": index}},
            "gid_table": [{"port": 1, "index": index, "gid": "0000:0000:0000:0000:0000:ffff:%s" % ipv4[1], "type": "RoCE v2",
                           "ipv4": ipv4[0]}],
            "nccl_env": {"path": "/etc/nccl.conf", "gid_index": index, "conf_differs": False}}


RESULTS = {"tenant-a": result("rxeA", 1, ("192.168.83.10", "c0a8:530a")), "tenant-b": result("rxeB", 2, ("192.168.84.10", "c0a8:540a"))}
PLAY = """
- name: Test | Two guests after their first mlx_rocev2 call
  hosts: all
  gather_facts: false
  tasks:
    - name: Test | The call's result
      ansible.builtin.set_fact:
        __guest_rdma_rocev2: "{{ results[inventory_hostname] }}"
        __guest_rdma_calls: {rocev2: {nccl_env: {path: /etc/nccl.conf, ib_hca: [], gid_index: discover, extra: {}}}}

    - name: Test | The fleet step
      ansible.builtin.include_role:
        name: gpuvirt.tenancy.guest_rdma
        tasks_from: fleet.yml

    - name: Test | Say the write
      ansible.builtin.debug:
        msg: "{{ __guest_rdma_fleet.write }}"
"""


def run(tmp_path, policy):
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text("".join("%s ansible_connection=local ansible_python_interpreter=%s\n" % (name, sys.executable)
                                            for name in ("tenant-b", "tenant-a")))
    (tmp_path / "vars.json").write_text(json.dumps({"results": RESULTS, "gpuvirt_rdma": {"gid_policy": policy}}))
    return run_playbook(["-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml"), "-e", "@%s" % (tmp_path / "vars.json")], tmp_path)


def test_the_uniform_policy_fails_every_host_with_the_table(tmp_path):
    rc, out, records = run(tmp_path, "uniform")
    assert rc != 0, out
    failed = [r for r in records if r["status"] == "failed"]
    assert sorted(r["host"] for r in failed) == ["tenant-a", "tenant-b"], out
    assert all(r["task"].endswith("Fail the play when the RoCE v2 + IPv4 GID is not at the same index everywhere") for r in failed)
    # the table in host name order, whatever the inventory's order; a tie goes to the first host
    assert failed[0]["result"]["msg"].startswith("gid_policy uniform: the RoCE v2 + IPv4 GID is not at index 1 on tenant-b."), out


def test_a_per_host_policy_decides_each_guests_write_from_the_fleet(tmp_path):
    rc, out, records = run(tmp_path, "per_host")
    assert rc == 0, out
    said = dict((r["host"], r["result"]["msg"]) for r in records if r["task"] == "Test | Say the write")
    for host in ("tenant-a", "tenant-b"):
        assert said[host]["hosts_entries"] == [{"ip": "192.168.83.10", "names": ["tenant-a-rdma"]},
                                               {"ip": "192.168.84.10", "names": ["tenant-b-rdma"]}]
        assert said[host]["pending"] is False and said[host]["options"]["gid_index"] == "discover"
        assert said[host]["options"]["ib_hca"] == ["%s:1" % RESULTS[host]["rdma_device"]]
