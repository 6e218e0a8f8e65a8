# -*- coding: utf-8 -*-
"""The guest stage's decisions (plugin_utils rdma, the guest_rdma role's actions): rdma_fleet and
rdma_nccl_write (the fleet comparison and the decision whether a guest still needs its nccl_env
call), guest_rdma_calls, guest_verbs_problem and netdev_by_mac. The inputs are real mlx_rocev2 results, made by the
module on fake GID tables (the lab's soft-RoCE layout, docs/rdma_nccl.md, and the H100 capture's
link-local rows); the reports are the text the role's Jinja printed for the same fleets
(ansible-core 2.19)."""

from __future__ import annotations

import os
import re

import pytest
import yaml
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import (
    NCCL_OPTIONAL, RdmaInputError, guest_rdma_calls, guest_verbs_problem, netdev_by_mac, rdma_fleet, rdma_nccl_write,
    registered_verbs_problem)
from ansible_collections.gpuvirt.tenancy.plugins.action import rdma_calls as rdma_calls_action
from ansible_collections.gpuvirt.tenancy.plugins.action import rdma_fleet as rdma_fleet_action
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.modules import mlx_rocev2, nccl_env

from conftest import run_module  # pylint: disable=import-error
from fakes.actions import run_action  # pylint: disable=import-error
from fakes.rdma import FakeConfigfs, add_port  # pylint: disable=import-error


ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "guest_rdma", "tasks", "main.yml")
RESULT_VAR = "__guest_rdma_rocev2"
SUFFIX = "-rdma"

# host -> (RDMA device, GID rows); tenant-a and tenant-b as on the lab, tenant-c with no IPv4 GID
GUESTS = {
    "tenant-a": ("rxeA", [(0, "fe80:0000:0000:0000:5054:00ff:fe12:3456", "v2", "ens12"),
                          (1, "0000:0000:0000:0000:0000:ffff:c0a8:530a", "v2", "ens12")]),
    "tenant-b": ("rxeB", [(0, "fe80:0000:0000:0000:5054:00ff:fe00:8300", "v2", "vB"),
                          (1, "fd00:000b:0000:0000:0000:0000:0000:0010", "v2", "vB"),
                          (2, "0000:0000:0000:0000:0000:ffff:c0a8:540a", "v2", "vB")]),
    "tenant-c": ("mlx5_0", [(0, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v1", "ens3np0"),
                            (1, "fe80:0000:0000:0000:a288:c2ff:fe5b:03ec", "v2", "ens3np0")]),
}
HOSTS = "127.0.0.1\tlocalhost\n"


class Guest:
    """One tenant guest: its own root with its GID table, NCCL file and hosts file."""

    def __init__(self, base, name, rows=None):
        self.name = name
        self.device, default_rows = GUESTS[name]
        self.root = str(base / name)
        add_port(self.root, self.device, 1, rows or default_rows)
        self.kernel = FakeConfigfs(self.root, [(self.device, 1)])
        os.makedirs(os.path.join(self.root, "etc"), exist_ok=True)
        with open(os.path.join(self.root, "etc", "hosts"), "w", encoding="utf-8") as handle:
            handle.write(HOSTS)
        self.conf = "/etc/nccl.conf.d/%s.conf" % name

    def host(self):
        return Host(self.root, kernel=self.kernel)

    def read(self, path):
        real = os.path.join(self.root, path.lstrip("/"))
        if not os.path.exists(real):
            return None
        with open(real, encoding="utf-8") as handle:
            return handle.read()

    def inputs(self, gid_index, pin_hosts, topo_links=None):
        """The role's inputs (vars/main.yml's __guest_rdma_inputs) for this guest."""
        return {"device": self.device, "vf_mac": "", "port": "1", "netdev": "", "soft_roce": False, "install": False,
                "topo_file": "/etc/nccl-topo.xml", "topo_links": topo_links,
                "packages": [], "default_roce_mode": "v2", "persist": False, "gid_index": gid_index,
                "gid_policy": "per_host", "nccl_conf_path": self.conf, "socket_ifname": None, "net_gdr_level": None,
                "nccl_extra": {}, "addr_range": None, "nccl_version": None, "pin_hosts": pin_hosts,
                "hosts_file": "/etc/hosts"}

    def first_call(self, calls):
        """The role's mlx_rocev2 call with the options guest_rdma_calls built."""
        result = run_module(mlx_rocev2.main, calls["rocev2"], host=self.host())
        assert not result.get("failed"), result
        return result

    def second_call(self, write):
        """The role's nccl_env call with the options rdma_nccl_write built."""
        return run_module(nccl_env.main, write["options"], host=self.host())


def role_run(guests, gid_index="discover", policy="per_host", pin_hosts=True, topo_links=None):
    """The role's module calls on every guest, as tasks/main.yml and fleet.yml make them, with the
    options its actions build (rdma_calls; rdma_fleet with the play's hosts and hostvars as the
    task's variables): {host: (number of module calls, changed, the write decision)}; a failed
    fleet check raises."""
    calls = {}
    for guest in guests:
        built = run_action(rdma_calls_action, "rdma_calls", {"inputs": guest.inputs(gid_index, pin_hosts, (topo_links or {}).get(guest.name)),
                                                             "family_packages": {}})
        assert not built.get("failed") and built["changed"] is False, built
        calls[guest.name] = built
    results = dict((guest.name, guest.first_call(calls[guest.name])) for guest in guests)
    hostvars = dict((name, {RESULT_VAR: result}) for name, result in results.items())
    outcome = {}
    for guest in guests:
        fleet = run_action(rdma_fleet_action, "rdma_fleet", {
            "result_var": RESULT_VAR, "gid_index": gid_index, "gid_policy": policy, "hosts_suffix": SUFFIX,
            "options": calls[guest.name]["rocev2"]["nccl_env"]},
            task_vars={"ansible_play_hosts": [g.name for g in guests], "hostvars": hostvars, RESULT_VAR: results[guest.name]})
        assert not fleet.get("failed") and fleet["changed"] is False, fleet
        if policy == "uniform" and str(gid_index) != "auto" and fleet["outliers"]:
            raise AssertionError(fleet["report"])
        write = fleet["write"]
        count, changed = 1, results[guest.name]["changed"]
        if write["pending"]:
            second = guest.second_call(write)
            assert not second.get("failed"), second
            count, changed = 2, changed or second["changed"]
        outcome[guest.name] = (count, changed, write)
    return outcome


@pytest.fixture
def lab(tmp_path):
    return [Guest(tmp_path, "tenant-a"), Guest(tmp_path, "tenant-b")]


BLOCK = ("# BEGIN gpuvirt.tenancy guest_rdma\n192.168.83.10 tenant-a-rdma\n192.168.84.10 tenant-b-rdma\n"
         "# END gpuvirt.tenancy guest_rdma\n")


@pytest.mark.parametrize("pin_hosts", [True, False])
def test_a_converged_guest_costs_one_call_and_a_first_run_two(lab, pin_hosts):
    first = role_run(lab, pin_hosts=pin_hosts)
    assert [(calls, changed) for calls, changed, _write in first.values()] == [(2, True), (2, True)]
    # the end state the role's unconditional nccl_env call left before
    assert lab[0].read(lab[0].conf) == "NCCL_IB_GID_INDEX=1\nNCCL_IB_HCA=rxeA:1\n"
    assert lab[1].read(lab[1].conf) == "NCCL_IB_GID_INDEX=2\nNCCL_IB_HCA=rxeB:1\n"
    for guest in lab:
        assert guest.read("/etc/hosts") == HOSTS + (BLOCK if pin_hosts else "")
    again = role_run(lab, pin_hosts=pin_hosts)
    assert dict((name, (calls, changed, write["reasons"])) for name, (calls, changed, write) in again.items()) == {
        "tenant-a": (1, False, []), "tenant-b": (1, False, [])}


def test_a_play_that_lists_the_guests_in_another_order_changes_nothing(lab):
    """The guests join gpuvirt_guests (add_host, group_by) in the order their tasks finish, so the
    play's host order changes between runs: the hosts block must not follow it."""
    role_run(lab)
    again = role_run(list(reversed(lab)))
    assert dict((name, (calls, changed, write["reasons"])) for name, (calls, changed, write) in again.items()) == {
        "tenant-a": (1, False, []), "tenant-b": (1, False, [])}
    for guest in lab:
        assert guest.read("/etc/hosts") == HOSTS + BLOCK


def test_the_skipped_call_would_have_changed_nothing(lab):
    """What makes the skip honest: the nccl_env call of a converged guest, run anyway, changes nothing."""
    role_run(lab)
    for name, (_calls, _changed, write) in role_run(lab).items():
        guest = next(g for g in lab if g.name == name)
        assert guest.second_call(write)["changed"] is False


def test_uniform_converged_fleet_costs_one_call(tmp_path):
    guests = [Guest(tmp_path, "tenant-a"), Guest(tmp_path, "tenant-b", rows=GUESTS["tenant-a"][1][:1] + [
        (1, "0000:0000:0000:0000:0000:ffff:c0a8:540a", "v2", "vB")])]
    assert [calls for calls, _c, _w in role_run(guests, policy="uniform").values()] == [2, 2]
    assert [calls for calls, _c, _w in role_run(guests, policy="uniform").values()] == [1, 1]
    assert [calls for calls, _c, _w in role_run(guests, gid_index=1, policy="uniform").values()] == [1, 1]


def test_a_guest_whose_address_changed_makes_every_guest_write_its_block(tmp_path, lab):
    role_run(lab)
    moved = Guest(tmp_path / "moved", "tenant-b", rows=GUESTS["tenant-b"][1][:2] + [
        (2, "0000:0000:0000:0000:0000:ffff:c0a8:540b", "v2", "vB")])
    for path in ("/etc/hosts", lab[1].conf):
        os.makedirs(os.path.dirname(os.path.join(moved.root, path.lstrip("/"))), exist_ok=True)
        with open(os.path.join(moved.root, path.lstrip("/")), "w", encoding="utf-8") as handle:
            handle.write(lab[1].read(path))
    outcome = role_run([lab[0], moved])
    assert dict((name, (calls, write["reasons"])) for name, (calls, _c, write) in outcome.items()) == {
        "tenant-a": (2, ["the block in /etc/hosts differs"]), "tenant-b": (2, ["the block in /etc/hosts differs"])}
    assert lab[0].read("/etc/hosts") == moved.read("/etc/hosts") == HOSTS + BLOCK.replace("84.10", "84.11")
    assert [calls for calls, _c, _w in role_run([lab[0], moved]).values()] == [1, 1]


PLANNED = {"path": "/etc/nccl.conf", "gid_index": 1, "settings": {}, "removed": [], "conf_differs": False,
           "hosts_path": "/etc/hosts", "hosts_differs": True,
           "hosts_found": ["192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]}
FLEET = {"expected": 1, "outliers": [], "report": "", "rows": [
    {"host": "tenant-a", "device": "rxeA", "port": 1, "index": 1, "gid": "x", "type": "RoCE v2", "ipv4": "192.168.83.10"},
    {"host": "tenant-b", "device": "rxeB", "port": 1, "index": 1, "gid": "y", "type": "RoCE v2", "ipv4": "192.168.84.10"},
    {"host": "tenant-c", "device": "mlx5_0", "port": 1, "index": None, "gid": None, "type": None, "ipv4": None}]}


@pytest.mark.parametrize("planned, gid_index, policy, written, reasons", [
    # converged: nothing differs
    ({}, "discover", "uniform", "1", []),
    ({}, "discover", "per_host", "discover", []),
    ({}, 1, "per_host", "1", []),
    ({"gid_index": "auto"}, "auto", "uniform", "auto", []),
    ({"hosts_found": None, "hosts_path": None}, "discover", "per_host", "discover", []),
    # the fleet's index is not the one the guest decided from its own table
    ({"gid_index": 2}, "discover", "uniform", "1", ["the fleet's gid_index 1 is not the guest's 2"]),
    ({"gid_index": 2}, 1, "per_host", "1", ["the fleet's gid_index 1 is not the guest's 2"]),
    ({"conf_differs": True}, "discover", "per_host", "discover", ["/etc/nccl.conf differs"]),
    # the NCCL topology file the guest's decision would write differs from the one in place
    ({"topo_differs": True, "topology": {"path": "/etc/nccl-topo.xml", "written": True}}, "discover", "per_host", "discover",
     ["the NCCL topology file /etc/nccl-topo.xml differs"]),
    ({"hosts_found": ["192.168.83.10 tenant-a-rdma"]}, "discover", "uniform", "1", ["the block in /etc/hosts differs"]),
    ({"hosts_found": []}, "discover", "uniform", "1", ["the block in /etc/hosts differs"]),
    # a block in another form (CRLF): the same lines would still rewrite it
    ({"hosts_found": None}, "discover", "uniform", "1", ["the block in /etc/hosts differs"]),
])
def test_what_makes_the_second_call_run(planned, gid_index, policy, written, reasons):
    planned = dict(PLANNED, **planned)
    if planned["hosts_path"] is None:  # without pin_hosts the first call does not read the block
        del planned["hosts_found"], planned["hosts_path"], planned["hosts_differs"]
    write = rdma_nccl_write(FLEET, planned, gid_index, policy, SUFFIX)
    assert write == {"gid_index": written, "reasons": reasons, "pending": bool(reasons), "hosts_entries": [
        {"ip": "192.168.83.10", "names": ["tenant-a-rdma"]}, {"ip": "192.168.84.10", "names": ["tenant-b-rdma"]}]}


@pytest.mark.parametrize("planned", [{"error": "gid_index 3 refused: ..."}, None, {}])
def test_a_guest_whose_nccl_env_would_fail_runs_it_to_fail_with_its_message(planned):
    write = rdma_nccl_write(FLEET, planned, 3, "per_host", SUFFIX)
    assert write["pending"] is True and write["reasons"][0].startswith("nccl_env would fail")


def test_entries_nccl_env_would_refuse_make_the_call_run():
    fleet = dict(FLEET, rows=[dict(row, host="tenant a") for row in FLEET["rows"]])
    write = rdma_nccl_write(fleet, PLANNED, "discover", "uniform", SUFFIX)
    assert write["reasons"] == ["the block in /etc/hosts differs"]


def test_the_input_must_be_a_fleet():
    with pytest.raises(RdmaInputError, match="fleet: expected the fleet's comparison"):
        rdma_nccl_write([], PLANNED, "discover", "uniform", SUFFIX)


def fleet_of(tmp_path, names, gid_index="discover"):
    guests = [Guest(tmp_path, name) for name in names]
    hostvars = dict((guest.name, {RESULT_VAR: guest.first_call(guest_rdma_calls(guest.inputs(gid_index, True)))}) for guest in guests)
    hostvars["failed-host"] = {RESULT_VAR: {"failed": True, "msg": "no RDMA device"}}
    hostvars["other-host"] = {}
    return rdma_fleet(names + ["failed-host", "other-host"], hostvars, RESULT_VAR, gid_index)


ROW_A = {"host": "tenant-a", "device": "rxeA", "port": 1, "index": 1, "gid": "0000:0000:0000:0000:0000:ffff:c0a8:530a",
         "type": "RoCE v2", "ipv4": "192.168.83.10"}
ROW_B = {"host": "tenant-b", "device": "rxeB", "port": 1, "index": 2, "gid": "0000:0000:0000:0000:0000:ffff:c0a8:540a",
         "type": "RoCE v2", "ipv4": "192.168.84.10"}
ROW_C = {"host": "tenant-c", "device": "mlx5_0", "port": 1, "index": None, "gid": None, "type": None, "ipv4": None}
HEAD = ("gid_policy uniform: the RoCE v2 + IPv4 GID is not at index %s on %s.\nSet it right on those hosts (address order "
        "decides GID order), or use gid_policy per_host, or gid_index auto (NCCL >= 2.21).\nhost -> index -> GID -> type\n")
LINE_A = "tenant-a (rxeA:1) -> 1 -> 0000:0000:0000:0000:0000:ffff:c0a8:530a (192.168.83.10) -> RoCE v2"
LINE_B = "tenant-b (rxeB:1) -> 2 -> 0000:0000:0000:0000:0000:ffff:c0a8:540a (192.168.84.10) -> RoCE v2"
LINE_C = "tenant-c (mlx5_0:1) -> none ->  () ->    <- differs from index %s\n"


@pytest.mark.parametrize("names, gid_index, rows, expected, outliers, report", [
    (["tenant-a", "tenant-b", "tenant-c"], "discover", [ROW_A, ROW_B, ROW_C], 1, ["tenant-b", "tenant-c"],
     HEAD % ("1", "tenant-b, tenant-c") + LINE_A + "\n" + LINE_B + "   <- differs from index 1\n"
     "  tenant-b index 1 holds fd00:000b:0000:0000:0000:0000:0000:0010 (no IPv4) -> RoCE v2\n" + LINE_C % "1"
     + "  tenant-c index 1 holds fe80:0000:0000:0000:a288:c2ff:fe5b:03ec (no IPv4) -> RoCE v2\n"),
    (["tenant-a", "tenant-b", "tenant-c"], "2", [ROW_A, ROW_B, ROW_C], 2, ["tenant-a", "tenant-c"],
     HEAD % ("2", "tenant-a, tenant-c") + LINE_A + "   <- differs from index 2\n  tenant-a index 2 holds no GID\n"
     + LINE_B + "\n" + LINE_C % "2" + "  tenant-c index 2 holds no GID\n"),
    (["tenant-a", "tenant-b"], "discover", [ROW_A, ROW_B], 1, ["tenant-b"],
     HEAD % ("1", "tenant-b") + LINE_A + "\n" + LINE_B + "   <- differs from index 1\n"
     "  tenant-b index 1 holds fd00:000b:0000:0000:0000:0000:0000:0010 (no IPv4) -> RoCE v2\n"),
    # hosts in name order whatever the play's order, and a tie goes to the first host's index
    (["tenant-b", "tenant-a"], "discover", [ROW_A, ROW_B], 1, ["tenant-b"],
     HEAD % ("1", "tenant-b") + LINE_A + "\n" + LINE_B + "   <- differs from index 1\n"
     "  tenant-b index 1 holds fd00:000b:0000:0000:0000:0000:0000:0010 (no IPv4) -> RoCE v2\n"),
    # no host has an IPv4 RoCE v2 GID: printed as the Jinja printed it (none as nothing, index 0 looked up)
    (["tenant-c"], "discover", [ROW_C], None, ["tenant-c"],
     HEAD % ("", "tenant-c") + LINE_C % "None"
     + "  tenant-c index  holds fe80:0000:0000:0000:a288:c2ff:fe5b:03ec (no IPv4) -> RoCE v1\n"),
    (["tenant-a"], "discover", [ROW_A], 1, [], HEAD % ("1", "") + LINE_A + "\n"),
])
def test_fleet_rows_pick_and_report_as_the_role_printed_them(tmp_path, names, gid_index, rows, expected, outliers, report):
    fleet = fleet_of(tmp_path, names, gid_index)
    assert fleet == {"rows": rows, "expected": expected, "outliers": outliers, "report": report}


@pytest.mark.parametrize("indexes, expected", [
    ([3, 3, 5], 3), ([5, 3, 3], 3), ([5, 3, 3, 5], 5), ([None, 4], 4), ([None, None], None), ([], None), ([7], 7),
])
def test_the_most_common_index_is_expected(indexes, expected):
    hostvars = {}
    for number, index in enumerate(indexes):
        table = [] if index is None else [{"device": "mlx5_0", "port": 1, "index": index, "gid": "g", "type": "RoCE v2",
                                           "netdev": "n", "ipv4": "10.0.0.%d" % number}]
        hostvars["h%d" % number] = {RESULT_VAR: {"rdma_device": "mlx5_0", "port": 1, "gid_table": table,
                                                 "roce_v2_ipv4_index": {"mlx5_0": {"1": index}}}}
    assert rdma_fleet(sorted(hostvars), hostvars, RESULT_VAR, "discover")["expected"] == expected


def test_the_roles_two_calls_take_their_options_from_the_actions():
    """A converged guest is only recognised when the first call decides with the options the
    second would write with: both come from the role's actions (the first call's nccl_env from
    rdma_calls, guest_rdma_calls; the second's from rdma_fleet's write, rdma_nccl_write, which starts
    from it), option for option."""
    with open(ROLE, encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    first = next(task for task in tasks if "gpuvirt.tenancy.mlx_rocev2" in task)["gpuvirt.tenancy.mlx_rocev2"]
    second = next(task for task in tasks if "gpuvirt.tenancy.nccl_env" in task)
    assert first["nccl_env"] == "{{ __guest_rdma_calls.rocev2.nccl_env }}"
    for key, value in first.items():
        assert value.startswith("{{ __guest_rdma_calls.rocev2.%s " % key), (key, value)
    for key, value in second["gpuvirt.tenancy.nccl_env"].items():
        assert value.startswith("{{ __guest_rdma_fleet.write.options.%s " % key), (key, value)
    assert set(second["gpuvirt.tenancy.nccl_env"]) >= set(guest_rdma_calls(INPUTS)["rocev2"]["nccl_env"]) | set(NCCL_OPTIONAL)
    assert second["when"] == "__guest_rdma_fleet.write.pending"


INPUTS = {"device": "", "vf_mac": "52:54:00:6b:00:01", "port": 1, "netdev": "", "soft_roce": False, "install": True,
          "packages": [], "default_roce_mode": "v2", "persist": True, "gid_index": "discover", "gid_policy": "uniform",
          "nccl_conf_path": "/etc/nccl.conf", "socket_ifname": None, "net_gdr_level": None, "nccl_extra": {},
          "addr_range": None, "nccl_version": None, "pin_hosts": False, "hosts_file": "/etc/hosts"}
FAMILIES = {"Debian": ["rdma-core", "ibverbs-utils"], "RedHat": ["rdma-core", "libibverbs-utils"]}


@pytest.mark.parametrize("change, rocev2", [
    # found by the VF's MAC: no ib_hca yet (the call names the device it finds), the packages per family
    ({}, {"netdev_mac": "52:54:00:6b:00:01", "packages": FAMILIES,
          "nccl_env": {"ib_hca": [], "gid_index": "discover"}}),
    # a device named: it and its port in NCCL_IB_HCA, the MAC not used
    ({"device": "mlx5_2", "port": "2"}, {"rdma_device": "mlx5_2", "port": 2, "nccl_env": {"ib_hca": ["mlx5_2:2"]}}),
    # packages named: for any family; not installing: no package read at all
    ({"packages": ["rdma-core"]}, {"packages": {"default": ["rdma-core"]}}),
    ({"install": "false"}, {"packages": None}),
    # the optional NCCL settings only where set; pin_hosts has the hosts block read ([])
    ({"socket_ifname": "eth0", "nccl_version": "", "pin_hosts": "yes"},
     {"nccl_env": {"socket_ifname": "eth0", "hosts_entries": []}}),
    ({"gid_index": 3, "persist": "no"}, {"persist": False, "nccl_env": {"gid_index": "3"}}),
])
def test_guest_rdma_calls_map_the_role_inputs(change, rocev2):
    calls = guest_rdma_calls(dict(INPUTS, **change), FAMILIES)["rocev2"]
    for key, value in rocev2.items():
        if key == "nccl_env":
            for name, wanted in value.items():
                assert calls["nccl_env"][name] == wanted, name
        elif value is None:
            assert key not in calls
        else:
            assert calls[key] == value, key
    assert "rdma_device" not in calls or "netdev_mac" not in calls
    assert calls["nccl_env_write"] is False
    assert not set(NCCL_OPTIONAL) - set(change) & set(calls["nccl_env"])
    assert "nccl_version" not in calls["nccl_env"]  # "" is unset, not a value


@pytest.mark.parametrize("change, words", [
    ({"vf_mac": ""}, "set guest_rdma_device"),
    ({"soft_roce": True}, "needs guest_rdma_device"),
    ({"soft_roce": True, "device": "rxe0", "vf_mac": ""}, "guest_rdma_netdev or guest_rdma_vf_mac"),
    ({"gid_index": "first"}, "gid_index must be discover, auto or an integer, got 'first'"),
    ({"port": "one"}, "guest_rdma_port must be a port number"),
    ({"port": 0}, "guest_rdma_port must be a port number"),
])
def test_guest_rdma_calls_name_the_bad_input(change, words):
    with pytest.raises(RdmaInputError, match=re.escape(words)):
        guest_rdma_calls(dict(INPUTS, **change), FAMILIES)


@pytest.mark.parametrize("pin_hosts, named, found, ib_hca", [
    (True, "", {"rdma_device": "mlx5_1", "port": 1}, ["mlx5_1:1"]),
    (False, "mlx5_0", {"rdma_device": "mlx5_0", "port": 1}, ["mlx5_0:1"]),
])
def test_the_write_takes_the_first_calls_options_with_the_fleets_index(pin_hosts, named, found, ib_hca):
    first = guest_rdma_calls(dict(INPUTS, device=named, pin_hosts=pin_hosts, socket_ifname="eth1"), FAMILIES)["rocev2"]["nccl_env"]
    write = rdma_nccl_write(FLEET, PLANNED, "discover", "uniform", SUFFIX, first, found)
    options = write["options"]
    assert options["gid_index"] == write["gid_index"] and options["ib_hca"] == ib_hca
    assert ("hosts_entries" in options) is pin_hosts
    if pin_hosts:
        assert options["hosts_entries"] == write["hosts_entries"]
    same = dict((key, value) for key, value in options.items() if key not in ("gid_index", "hosts_entries", "ib_hca"))
    assert same == dict((key, value) for key, value in first.items() if key not in ("gid_index", "hosts_entries", "ib_hca"))
    # without the first call's options the write is the decision only (the filter's older form)
    assert "options" not in rdma_nccl_write(FLEET, PLANNED, "discover", "uniform", SUFFIX)


# --------------------------------------------------------------------------- verbs see the device, or the role says why not
SEEN = {"rdma_device": "rxe0", "verbs": {"tool": "/usr/bin/ibv_devices", "devices": ["rxe0"], "seen": True},
        "packages": {"family": "Debian", "wanted": ["rdma-core", "ibverbs-providers", "ibverbs-utils"], "missing": []}}
UNSEEN = dict(SEEN, verbs={"tool": "/usr/bin/ibv_devices", "devices": [], "seen": False})
NO_TOOL = dict(SEEN, verbs={"tool": None, "devices": None, "seen": None},
               packages=dict(SEEN["packages"], missing=["ibverbs-providers", "ibverbs-utils"]))
APT_FAILED = {"failed": True, "changed": False,
              "msg": "Failed to update apt cache: W:Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease"}


@pytest.mark.parametrize("found, installed, recheck, words", [
    (SEEN, None, None, None),
    # the kernel holds rxe0 (rdma link), verbs list nothing: Debian's provider package named
    (UNSEEN, None, None, r"verbs see no rxe0 \(ibv_devices lists none\).*Install ibverbs-providers \(Debian\)"),
    (dict(UNSEEN, packages=dict(SEEN["packages"], family="RedHat")), None, None, r"Install libibverbs \(RedHat\)"),
    # nothing to tell with: ibv_devices is not installed, and the install failed (no way to a mirror)
    (NO_TOOL, APT_FAILED, None,
     r"cannot tell whether verbs see rxe0: ibv_devices is not installed.*"
     r"Installing ibverbs-providers, ibverbs-utils failed here: Failed to update apt cache: W:Failed to fetch"),
    # installed now: the second read decides
    (NO_TOOL, {"changed": True}, SEEN, None),
    (NO_TOOL, {"changed": True}, UNSEEN, "verbs see no rxe0"),
])
def test_guest_verbs_problem(found, installed, recheck, words):
    problem = guest_verbs_problem(found, installed, recheck)
    if words is None:
        assert problem == ""
    else:
        assert re.search(words, problem), problem


@pytest.mark.parametrize("args, words", [
    (("text",), "found \\(the mlx_rocev2 result\\) must be a dict, got str"),
    ((None,), "found \\(the mlx_rocev2 result\\) must be a dict, got NoneType"),
    ((SEEN, ["x"]), "installed \\(the install result\\) must be a dict, got list"),
])
def test_guest_verbs_problem_names_a_bad_input(args, words):
    with pytest.raises(RdmaInputError, match=words):
        guest_verbs_problem(*args)


GEN4 = {"link_speed": "16.0 GT/s PCIe", "link_width": 16}
PHB_LINKS = {"level": "PHB", "gpu": GEN4, "nic": GEN4, "switch": None, "missing": None}


def test_the_topology_file_in_the_roles_calls(tmp_path):
    """The guest stage with the host's link facts: a GPU guest (tenant-c, its mlx5_0 a PCI function beside an NVIDIA GPU)
    gets the file and NCCL_TOPO_FILE in the second call and none on a re-run; a soft-RoCE guest (tenant-a, as on the
    tenant bench) gets no file and the reason, and converges in one call all the same."""
    from fakes.host_tree import FakeHost  # pylint: disable=import-error,import-outside-toplevel
    ipv4 = GUESTS["tenant-c"][1] + [(2, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v1", "ens3np0"),
                                    (3, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v2", "ens3np0")]
    guests = [Guest(tmp_path, "tenant-a"), Guest(tmp_path, "tenant-c", rows=ipv4)]
    tree = FakeHost(guests[1].root)
    tree.add_pci("0000:00:02.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:00")
    tree.add_pci("0000:00:03.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:00")
    tree.add_pci("0000:01:00.0", "0x10de", "0x20b0", "0x030200", parent="0000:00:02.0")
    tree.link("/sys/class/infiniband/mlx5_0/device", tree.add_pci("0000:02:00.0", "0x15b3", "0x101e", "0x020000", parent="0000:00:03.0"))
    links = {"tenant-a": PHB_LINKS, "tenant-c": PHB_LINKS}
    first = role_run(guests, topo_links=links, pin_hosts=False)
    assert first["tenant-c"][0] == 2 and "NCCL_TOPO_FILE=/etc/nccl-topo.xml\n" in guests[1].read(guests[1].conf)
    assert '<pci busid="0000:01:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"/>' in guests[1].read("/etc/nccl-topo.xml")
    assert guests[0].read("/etc/nccl-topo.xml") is None and "NCCL_TOPO_FILE" not in guests[0].read(guests[0].conf)
    again = role_run(guests, topo_links=links, pin_hosts=False)
    assert [(calls, changed) for calls, changed, _write in again.values()] == [(1, False), (1, False)]
    # the first call's plan carries what the role publishes as guest_rdma_topology
    planned = dict((guest.name, guest.first_call(guest_rdma_calls(guest.inputs("discover", False, links[guest.name])))["nccl_env"])
                   for guest in guests)
    assert planned["tenant-c"]["topology"]["written"] is True and planned["tenant-c"]["topo_differs"] is False
    assert "rxeA is not a PCI function" in planned["tenant-a"]["topology"]["reason"]
    # the tenant loses its GPU (guest_hosts then gives 'missing'): the role's second call removes the file it wrote and
    # NCCL_TOPO_FILE, and a re-run costs one call again
    gone = {"tenant-a": PHB_LINKS, "tenant-c": {"missing": "the plan gives the tenant no GPU on its host"}}
    removed = role_run(guests, topo_links=gone, pin_hosts=False)
    assert removed["tenant-c"][0] == 2 and removed["tenant-c"][1] is True
    assert guests[1].read("/etc/nccl-topo.xml") is None and "NCCL_TOPO_FILE" not in guests[1].read(guests[1].conf)
    settled = role_run(guests, topo_links=gone, pin_hosts=False)
    assert [(calls, changed) for calls, changed, _write in settled.values()] == [(1, False), (1, False)]


def test_netdev_by_mac_from_gathered_facts():
    facts = {"interfaces": ["lo", "mgmt0", "enp7s0", "enp7s0.101"], "lo": {"macaddress": "00:00:00:00:00:00"},
             "mgmt0": {"macaddress": "56:2f:1c:aa:03:9e"}, "enp7s0": {"macaddress": "52:54:00:00:00:0a"},
             "enp7s0.101": {"macaddress": "52:54:00:00:00:0a"}}
    assert netdev_by_mac(facts, "52:54:00:00:00:0A") == "enp7s0"
    with pytest.raises(RdmaInputError, match="no netdev carries 52:54:00:00:00:0b .*mgmt0 56:2f:1c:aa:03:9e"):
        netdev_by_mac(facts, "52:54:00:00:00:0b")


@pytest.mark.parametrize("installed, reread, words", [
    # a skipped install (nothing missing) and a skipped second read say nothing: the first read decides
    ({"skipped": True, "changed": False}, {"skipped": True, "changed": False}, "cannot tell whether verbs see rxe0"),
    # an install that changed: the second read decides
    ({"changed": True}, dict(SEEN, changed=False), None),
    # a converged install (changed false, not failed) is not named
    ({"changed": False, "failed": False, "msg": "nothing"}, {"skipped": True},
     "cannot tell whether verbs see rxe0: ibv_devices is not installed \\(Debian ibverbs-utils, RHEL libibverbs-utils\\)\\. Install it"),
    (APT_FAILED, {"skipped": True}, "Installing ibverbs-providers, ibverbs-utils failed here"),
])
def test_the_roles_registered_results_decide_as_its_jinja_did(installed, reread, words):
    """The install's result counts where it changed or failed, the second read where it ran (the role's
    `is changed or is failed` and `is not skipped`)."""
    problem = registered_verbs_problem(NO_TOOL, installed, reread)
    if words is None:
        assert problem == ""
    else:
        assert re.search(words, problem), problem
