# -*- coding: utf-8 -*-
"""tenant_domain with ``tenants``: the tenants stage decided on the host in one call (the domains
read, the plan made with the planner the plan_tenants filter runs, the removals, the VF settings
and the definitions), against libvirt's test driver (conftest ``libvirt_conn``) and the lab host
tree with a ConnectX PF (netdev, 2 VFs, each in its own IOMMU group) added on node 1; ``ip`` is
the stand-in of tests/unit/fakes/standins, its VF settings kept in a state file."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_spec
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy import guest_inputs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import seed_documents, tenant_paths
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import stage_checks
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.modules import tenant_domain, tenant_domain_info

from conftest import LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.kernel import lab_host  # pylint: disable=import-error
from fakes.paths import STANDINS  # pylint: disable=import-error

EDU = "0000:82:00.0"
PF = "0000:84:00.0"
VFS = ["0000:84:00.1", "0000:84:00.2"]
GPU_IDS, NIC_IDS = ["1234:11e8"], ["15b3:1017"]
# the planner filter plan_tenants runs on the controller (its wrapping: tests/unit/plugins/filter)
PLAN = tenant_plan.plan
GUEST_DIR = "/var/lib/libvirt/images/gpuvirt"


@pytest.fixture
def stage_host(tmp_path, monkeypatch):
    tree, kernel = lab_host(tmp_path / "root")
    tree.add_pci("0000:80:03.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1, driver="pcieport",
                 iommu_group=9)
    tree.add_pci(PF, "0x15b3", "0x1017", "0x020000", parent="0000:80:03.0", numa_node=1, driver="mlx5_core", iommu_group=10,
                 sriov_totalvfs=8, netdevs=("enp132s0f0np0",))
    tree.add_vfs(PF, VFS, "0x15b3", "0x1018", "0x020000", numa_node=1, groups=[11, 12])
    for vf in VFS:
        tree.bind(vf, "vfio-pci")
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", tree.root)
    monkeypatch.setenv("PATH", STANDINS + os.pathsep + os.environ["PATH"])
    # the running host's: under a capture ip is not asked
    return LiveHost(tree.root, kernel=kernel)


@pytest.fixture
def ib_stage_host(tmp_path, monkeypatch):
    """The stage host with the ConnectX PF's port in InfiniBand mode and no netdev (IPoIB not loaded): its RDMA
    device's port reads link_layer InfiniBand, as sysfs writes it."""
    tree, kernel = lab_host(tmp_path / "root")
    tree.add_pci("0000:80:03.0", "0x1b36", "0x000c", "0x060400", root_bus="pci0000:80", numa_node=1, driver="pcieport",
                 iommu_group=9)
    path = tree.add_pci(PF, "0x15b3", "0x1017", "0x020000", parent="0000:80:03.0", numa_node=1, driver="mlx5_core",
                        iommu_group=10, sriov_totalvfs=8, rdma_devices=("mlx5_0",))
    tree.write(path + "/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand")
    tree.add_vfs(PF, VFS, "0x15b3", "0x1018", "0x020000", numa_node=1, groups=[11, 12])
    for vf in VFS:
        tree.bind(vf, "vfio-pci")
    monkeypatch.setenv("PATH", STANDINS + os.pathsep + os.environ["PATH"])
    return LiveHost(tree.root, kernel=kernel)


@pytest.mark.parametrize("check_mode", [True, False])
def test_a_vlan_for_a_vf_of_a_pf_without_netdev_is_refused_before_any_change(libvirt_conn, ib_stage_host, check_mode):
    """A VF's MAC, VLAN and spoof check go through its PF's netdev: a tenant with a vlan on a VF of a PF with none (an
    InfiniBand port) is refused, naming the tenant, the PF and the fix, not placed with its VLAN dropped."""
    failed = run_module(tenant_domain.main, call([tenant("st-a", vfs=1, vlan=100)]), check_mode=check_mode, host=ib_stage_host)
    assert failed["failed"] and not failed["changed"], failed
    assert failed["msg"].startswith("tenant st-a: its vlan cannot be set on VF 0000:84:00.1: PF 0000:84:00.0 has no netdev")
    assert "link_type: eth" in failed["msg"] and "netdev driver" in failed["msg"]
    assert names(libvirt_conn) == []
    # without vlan or mac nothing is lost: the tenant is planned
    plain = run_module(tenant_domain.main, call([tenant("st-a", vfs=1)]), check_mode=True, host=ib_stage_host)
    assert not plain.get("failed") and plain["placements"]["st-a"]["vfs"] == ["0000:84:00.1"], plain


def vf_state(tmp_path, index):
    with open(str(tmp_path / "ip.json"), encoding="utf-8") as handle:
        vf = json.load(handle)["enp132s0f0np0"]["vfs"][index]
    return vf["mac"], vf["vlan"]


def tenant(name, **options):
    return dict({"name": name, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "firmware": "bios"}, **options)


def call(tenants, **options):
    return dict({"uri": URI, "tenants": tenants, "domain_type": "test", "policy": {"emulator": "vcpus"},
                 "gpu_ids": GPU_IDS, "nic_ids": NIC_IDS, "vf_persist": False, "live": True}, **options)


def names(conn):
    return sorted(d.name() for d in conn.listAllDomains(0) if d.name() != "test")


def test_the_plan_made_on_the_host_is_the_filters_plan(libvirt_conn, stage_host, tmp_path):
    tenants = [tenant("st-a", gpus=1, vfs=1, vlan=100, state="running"), tenant("st-b", vfs=1)]
    done = run_module(tenant_domain.main, call(tenants), check_mode=True, host=stage_host)
    assert not done.get("failed") and done["changed"], done
    read = run_module(tenant_domain_info.main, {"uri": URI, "names": ["st-a", "st-b"], "foreign": True}, host=stage_host)
    policy = {"emulator": "vcpus", "existing": read["domains"]}
    expected = PLAN(stage_host.topology(GPU_IDS, NIC_IDS), tenants, policy, read["foreign"])
    assert json.loads(json.dumps(done["plan"])) == json.loads(json.dumps(expected))
    assert done["placements"]["st-a"]["gpus"] == [EDU] and sorted(done["placements"]) == ["st-a", "st-b"]
    assert done["unplaced"] == {} and "test" in done["foreign"]
    # the planned VF settings: each network VF its MAC, the tenant's VLAN, spoof checking on, trust off
    [settings] = done["vf_settings"]
    vlans = dict((v["address"], v["vlan"]) for v in settings["vfs"])
    assert settings["pf"] == PF and vlans == {done["placements"]["st-a"]["vfs"][0]: 100, done["placements"]["st-b"]["vfs"][0]: 0}
    assert all(v["spoofchk"] is True and v["trust"] is False for v in settings["vfs"])
    # check mode: nothing defined, no VF set
    assert names(libvirt_conn) == [] and [vf_state(tmp_path, i) for i in (0, 1)] == [("00:00:00:00:00:00", 0)] * 2


def test_one_call_defines_sets_the_vfs_then_removes_and_resets(libvirt_conn, stage_host, tmp_path):
    tenants = [tenant("st-a", gpus=1, vfs=1, vlan=100, mac="52:54:00:aa:00:01", state="running"), tenant("st-b")]
    done = run_module(tenant_domain.main, call(tenants), host=stage_host)
    assert not done.get("failed") and done["changed"], done
    assert names(libvirt_conn) == ["st-a", "st-b"] and done["powered_on"] == ["st-a"] and done["created"] == ["st-a", "st-b"]
    vf = done["placements"]["st-a"]["vfs"][0]
    assert vf_state(tmp_path, VFS.index(vf)) == ("52:54:00:aa:00:01", 100)
    # a re-run of the converged host changes nothing
    again = run_module(tenant_domain.main, call(tenants), host=stage_host)
    assert again["changed"] is False and again["placements"]["st-a"]["kept"], again
    # st-a marked absent: removed first, then its VF cleared on the PF, in the same call
    gone = [dict(tenants[0], state="absent", force_off=True, shutdown_timeout=0), tenants[1]]
    removed = run_module(tenant_domain.main, call(gone), host=stage_host)
    assert not removed.get("failed") and removed["removed"] == ["st-a"], removed
    assert names(libvirt_conn) == ["st-b"] and EDU in removed["released_devices"]
    assert vf_state(tmp_path, VFS.index(vf)) == ("00:00:00:00:00:00", 0)
    assert removed["sriov_vfs"]["changed"]


def test_check_mode_changes_nothing(libvirt_conn, stage_host, tmp_path):
    tenants = [tenant("st-a", gpus=1, vfs=1, vlan=100, state="running")]
    done = run_module(tenant_domain.main, call(tenants), check_mode=True, diff=True, host=stage_host)
    assert done["changed"] and done["created"] == ["st-a"] and done["sriov_vfs"]["changed"], done
    assert "+++" not in json.dumps(done.get("warnings") or [])
    assert names(libvirt_conn) == [] and vf_state(tmp_path, 0) == ("00:00:00:00:00:00", 0)


def test_the_planned_entries_are_not_checked_again_a_users_domains_are(libvirt_conn, stage_host, monkeypatch):
    """The tenants stage hands the entries it makes from the tenant records to the domain code: the
    field checkers of tenant_domain's options (TenantSpec's, the guest's address and MAC checks) do
    not run over them again (the records checked those fields once, with their own checkers), while
    an entry of a user's ``domains`` still passes through them."""
    ran = []

    def checker(name):
        def refuse(*_args, **_kwargs):
            ran.append(name)
            raise AssertionError("%s ran" % name)
        return refuse

    for module, checkers in ((tenant_spec, ("check_domain_name", "check_domain_type", "check_size", "size_name", "check_mac",
                                            "check_tenant_vlan", "check_firmware", "check_machine", "check_arch",
                                            "address_attributes")),
                             (guest_inputs, ("check_mac", "check_ipv4"))):
        for name in checkers:
            monkeypatch.setattr(module, name, checker(name))
    tenants = [tenant("st-a", gpus=1, vfs=1, vlan=100, mac="52:54:00:AA:00:01", state="running"),
               tenant("st-b", data_nic={"network": "gpuvirt-data", "mac": "02:00:00:AA:BB:CC"},
                      guest={"address": "192.168.150.12/24", "rdma_address": "10.20.0.12/24", "management_mac": "52:54:00:AA:00:02"})]
    done = run_module(tenant_domain.main, call(tenants, guest_access={"management": {"network": "gpuvirt-mgmt"}}),
                      check_mode=True, host=stage_host)
    assert not done.get("failed") and done["created"] == ["st-a", "st-b"] and ran == [], (done, ran)
    guest = done["domains"]["st-b"]["guest"]
    assert (guest["management"]["mac"], guest["data_nic"]["mac"]) == ("52:54:00:aa:00:02", "02:00:00:aa:bb:cc"), guest
    # a user's domains: its fields checked, the first one its name
    with pytest.raises(AssertionError, match="check_domain_name ran"):
        run_module(tenant_domain.main, {"uri": URI, "domains": [{"name": "st-c", "domain_type": "test", "vcpus": 1, "memory_mb": 64,
                                                                "firmware": "bios"}]}, check_mode=True, host=stage_host)
    assert ran == ["check_domain_name"]


def test_a_foreign_domains_devices_are_kept_out(libvirt_conn, stage_host):
    other = {"name": "legacy", "uri": URI, "domain_type": "test", "arch": "i686", "firmware": "bios", "vcpus": 1,
             "memory_mb": 64, "gpus": [EDU], "mmio_window_mb": 0}
    assert not run_module(tenant_domain.main, other, host=stage_host).get("failed")
    done = run_module(tenant_domain.main, call([tenant("st-a", gpus=1)]), host=stage_host)
    assert not done.get("failed"), done
    assert "st-a" in done["unplaced"] and done["placements"] == {}
    assert done["foreign"]["legacy"]["gpus"] == [EDU]
    # never reused nor removed
    assert names(libvirt_conn) == ["legacy"] and done["removed"] == []


@pytest.mark.parametrize("args, words", [
    (call([{"vcpus": 1, "memory_mb": 64}]), "tenants[0]: name: required"),
    (call([tenant("st-a"), tenant("st-a")]), "tenants[1] (st-a): name st-a is also tenants[0]"),
    (call([tenant("st-a")], domains=[{"name": "st-a", "state": "absent"}]), "tenants|domains"),
    (call([tenant("st-a")], vcpus=2), "mutually exclusive: tenants|vcpus"),
    ({"uri": URI, "name": "st-a", "vcpus": 1, "memory_mb": 64, "policy": {}}, "missing parameter(s) required by 'policy': tenants"),
    (call([tenant("st-a")], policy={"existing": {}}), "policy.existing"),
    (call([tenant("st-a", vcpus=0)]), "st-a"),
    # the stage's own settings, every tenant's default: checked once, naming the option
    (call([tenant("st-a")], machine="q35\n"), "machine: 'q35\\n' is not a name such as q35 or pc-q35-8.2"),
    (call([tenant("st-a")], domain_type="KVM!"), "domain_type: 'KVM!' is not a name such as kvm"),
    # the tenant records' rules over the list, before the plan (tenancy/record.py)
    (call([tenant("st-a", guest={"address": "192.168.150.11/24"}), tenant("st-b", guest={"address": "192.168.150.11/24"})]),
     "tenants[1] (st-b): guest.address 192.168.150.11 is also the guest.address of tenants[0] (st-a)"),
    (call([tenant("st-a", guest={"address": "192.168.150.1/24"})],
          guest_access={"management_network": {"name": "gpuvirt-mgmt", "address": "192.168.150.1/24", "forward": "nat"}}),
     "tenants[0] (st-a): guest.address 192.168.150.1 is the host's own address on the management network"),
])
def test_bad_inputs_are_refused_naming_the_input(libvirt_conn, stage_host, args, words):
    done = run_module(tenant_domain.main, args, host=stage_host)
    assert done["failed"] and words in done["msg"] and not done.get("changed"), done
    assert names(libvirt_conn) == []


def test_the_gate_answers_the_tenants_stage_only_for_these_options(libvirt_conn, stage_host):
    options = call([tenant("st-a", state="running")])
    defined = run_module(tenant_domain.main, options, host=stage_host)
    assert defined["created"] == ["st-a"], defined
    checks = stage_checks.check_stages(stage_host, {"tenants": options}, Run(check_mode=True))
    check = checks["tenants"]
    assert check["module"] == "tenant_domain" and check["error"] is None and check["changed"] is False, check
    assert stage_checks.check_result(check, options)["placements"]["st-a"]["kept"]
    # other options (another tenant list, another setting): the stage makes its own call
    assert stage_checks.check_result(check, call([tenant("st-a", state="running"), tenant("st-b")])) == {}
    assert stage_checks.check_result(check, dict(options, live=False)) == {}
    # a check that would change something, or failed, is never taken
    changing = stage_checks.check_stages(stage_host, {"tenants": call([tenant("st-a"), tenant("st-b")])}, Run(check_mode=True))
    assert changing["tenants"]["changed"] is True
    assert stage_checks.check_result(changing["tenants"], call([tenant("st-a"), tenant("st-b")])) == {}
    failing = stage_checks.check_stages(stage_host, {"tenants": call([{"vcpus": 1}])}, Run(check_mode=True))
    assert "tenants[0]: name" in failing["tenants"]["error"]
    assert stage_checks.check_result(failing["tenants"], call([{"vcpus": 1}])) == {}
    assert names(libvirt_conn) == ["st-a"]


def test_an_address_another_domains_seed_gives_is_refused(libvirt_conn, stage_host):
    """Across calls: a tenant's address is not one the seed of another domain on the host gives (its
    network-config kept beside its seed.iso, as guest_image writes it); nothing changes."""
    paths = tenant_paths(GUEST_DIR, "legacy")
    documents = seed_documents("legacy", {"user": "ops", "ssh_authorized_keys": [], "packages": []},
                               {"network": "gpuvirt-mgmt", "mac": "52:54:00:00:00:99", "address": "192.168.150.11/24"}, None)
    os.makedirs(stage_host.path(paths["seed_dir"]))
    with open(stage_host.path(paths["seed_dir"] + "/network-config"), "w", encoding="utf-8") as handle:
        handle.write(documents["network-config"])
    other = {"name": "legacy", "uri": URI, "domain_type": "test", "arch": "i686", "firmware": "bios", "vcpus": 1,
             "memory_mb": 64, "mmio_window_mb": 0, "disks": [{"path": paths["seed"], "format": "raw", "target": "sda"}]}
    assert not run_module(tenant_domain.main, other, host=stage_host).get("failed")
    done = run_module(tenant_domain.main, call([tenant("st-a", guest={"address": "192.168.150.11/24"})]), host=stage_host)
    assert done["failed"] and not done.get("changed"), done
    assert done["msg"].startswith("tenants[0] (st-a): guest.address 192.168.150.11 is already the address of domain legacy")
    assert names(libvirt_conn) == ["legacy"]
    # another address is planned
    fine = run_module(tenant_domain.main, call([tenant("st-a", guest={"address": "192.168.150.12/24"})]), check_mode=True,
                      host=stage_host)
    assert not fine.get("failed") and "st-a" in fine["placements"], fine


def test_every_policy_in_the_modules_examples_is_one_the_planner_takes():
    # an example is what users copy: a policy value the planner refuses (numa: strict) must not be in one
    import yaml  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner_request import read_policy  # pylint: disable=import-outside-toplevel
    policies = [task["gpuvirt.tenancy.tenant_domain"]["policy"] for task in yaml.safe_load(tenant_domain.EXAMPLES)
                if isinstance(task.get("gpuvirt.tenancy.tenant_domain"), dict) and "policy" in task["gpuvirt.tenancy.tenant_domain"]]
    assert policies, "the tenant_domain examples show a policy"
    for policy in policies:
        read_policy(policy)
