# -*- coding: utf-8 -*-
"""vfio_stage: the SR-IOV/VFIO stage's desired state decided on the host. The IOMMU-group
companions of the tenant GPUs that vfio_bind binds are the ones the controller's filter
(tenant_group_devices) gives for the same host model, on trees built from real listings; the
sriov_vfs request is every PF with its count, the one the standalone host_sriov role's call builds
on the controller (pf_request), and no tenant's VF settings (the tenants stage gives those)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import group_devices
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.pool_groups import pool_groups
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import stage as vfio_stage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import GPU_AUDIO, lab_host, lab_host_with_nic, rtx_group_host, v100_pairs_host  # pylint: disable=import-error

# what the filter tenant_group_devices runs on the controller (its wrapping: tests/unit/plugins/filter)
GROUP_DEVICES = group_devices
GPU_IDS = ["1234:11e8"]


def model(tree, gpu_ids=()):
    """The host model a module call reads (host.topology), as the gate hands it to the controller."""
    return Host(tree.root, commands=RecordedCommands()).topology(gpu_ids)


@pytest.mark.parametrize("build, gpus", [
    # the edu GPU and its audio function in group 7
    (lab_host_with_nic, ["0000:82:00.0"]),
    # the bare lab: the GPU alone in its group
    (lab_host, ["0000:82:00.0"]),
    # an RTX 3070 Ti, its HDA function and the root port in group 1 (the bridge does not go along)
    (rtx_group_host, ["0000:01:00.0"]),
    (rtx_group_host, []),
    # six V100s paired in groups: no other function goes along
    (v100_pairs_host, ["0000:27:00.0", "0000:28:00.0", "0000:43:00.0", "0000:44:00.0"]),
])
def test_companions_on_the_host_are_the_filters(tmp_path, build, gpus):
    tree, _kernel = build(tmp_path / "root")
    topology = model(tree, GPU_IDS)
    addresses, companions = vfio_stage.tenant_gpus(topology, gpus)
    assert addresses == gpus
    assert companions == GROUP_DEVICES(model(tree, GPU_IDS), {"gpus": gpus})["companions"]
    # the host's groups (the planner's index, without its search) are the filter's, whole
    assert pool_groups(topology, gpus=gpus) == GROUP_DEVICES(model(tree, GPU_IDS), {"gpus": gpus})
    if build is lab_host_with_nic:
        assert companions == [GPU_AUDIO]
    if build is rtx_group_host and gpus:
        assert companions == ["0000:01:00.1"]


def test_a_gpu_the_planner_leaves_out_for_its_group_is_refused_in_its_words(tmp_path):
    """V100 43:00.0 shares group 21 with 44:00.0, a GPU outside the pool that the host keeps: the planner leaves
    43:00.0 out (a group goes to one tenant or to none), so the stage refuses it with the planner's reason and fix."""
    tree, _kernel = v100_pairs_host(tmp_path / "root")
    topology = model(tree, GPU_IDS)
    with pytest.raises(InputError) as err:
        vfio_stage.tenant_gpus(topology, ["0000:27:00.0", "0000:28:00.0", "0000:43:00.0"])
    left_out = GROUP_DEVICES(model(tree, GPU_IDS), {"gpus": ["0000:27:00.0", "0000:28:00.0", "0000:43:00.0"]})["left_out"]
    assert str(err.value) == "gpus: %s. Nothing was changed" % left_out["0000:43:00.0"]
    assert "0000:44:00.0 (a GPU that stays with the host" in str(err.value) and "bind_group" not in str(err.value)


def test_no_gpus_option_takes_no_companions(tmp_path):
    tree, _kernel = lab_host_with_nic(tmp_path / "root")
    assert vfio_stage.tenant_gpus(model(tree, GPU_IDS), None) == ([], [])


def params(sriov_pfs, **options):
    return dict({"sriov_pfs": sriov_pfs, "autoprobe": False, "persist": True, "force": False}, **options)


def test_the_request_is_every_pf_with_its_count_and_no_vf_settings(tmp_path):
    tree, _kernel = lab_host_with_nic(tmp_path / "root")
    host = Host(tree.root, commands=RecordedCommands())
    pfs = [{"pf": "ens12", "num_vfs": 4, "autoprobe": True, "link_type": "eth"}, {"pf": "0000:81:00.0", "num_vfs": 0}]
    options, vfs_of = vfio_stage.sriov_request(params(pfs), host, host.topology())
    assert [(p["pf"], p["num_vfs"], p["autoprobe"], p["persist"], p["force"]) for p in options["pfs"]] == [
        ("ens12", 4, True, True, False), ("0000:81:00.0", 0, False, True, False)]
    # the tenants stage gives the tenants' VFs their settings: this request names none
    assert not options["vf_settings"]
    # the same PFs as the host_sriov role's call, built on the controller from the same list
    assert [dict((k, p[k]) for k in ("pf", "num_vfs", "autoprobe", "persist", "force")) for p in options["pfs"]] \
        == vfio_stage.pf_request(pfs, False, True, False)["pfs"]
    # only the PFs with VFs have VFs to bind
    assert vfs_of == ["ens12"]


@pytest.mark.parametrize("pfs", ["0000:81:00.0", [{"num_vfs": 4}], [{"pf": "x"}], ["x"], None])
def test_pf_request_refuses_what_is_not_the_pf_list(pfs):
    with pytest.raises(InputError, match=r"expected the PF list \[\{pf, num_vfs, autoprobe\}\] \(gpuvirt_sriov_pfs\)"):
        vfio_stage.pf_request(pfs)


def test_without_sriov_pfs_no_sriov_part(tmp_path):
    tree, _kernel = lab_host_with_nic(tmp_path / "root")
    host = Host(tree.root, commands=RecordedCommands())
    assert vfio_stage.sriov_request({"sriov_pfs": None}, host, host.topology()) == (None, [])
