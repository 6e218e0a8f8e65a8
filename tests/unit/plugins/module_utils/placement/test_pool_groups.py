# -*- coding: utf-8 -*-
"""placement/pool_groups: the IOMMU groups of the tenant pools read from the planner's host index
alone (what vfio_bind ships), against the planner's own answer over a plan of no tenant (what the
filter tenant_group_devices gives, placement/planner.py group_devices), on trees built from real
listings: the same groups, and the same refusal for a bad pool."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import group_devices
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.pool_groups import pool_groups
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import NIC_PF, lab_host, lab_host_with_nic, rtx_group_host, v100_pairs_host  # pylint: disable=import-error

GPU_IDS = ["1234:11e8"]


def model(tree):
    return Host(tree.root, commands=RecordedCommands()).topology(GPU_IDS)


@pytest.mark.parametrize("build, pools", [
    (lab_host_with_nic, {}),
    (lab_host_with_nic, {"gpus": ["0000:82:00.0"]}),
    (lab_host_with_nic, {"host_devices": [NIC_PF]}),
    (lab_host, {"gpus": []}),
    (rtx_group_host, {"gpus": ["0000:01:00.0"]}),
    (rtx_group_host, {}),
    (v100_pairs_host, {"gpus": ["0000:27:00.0", "0000:28:00.0", "0000:43:00.0"]}),
    (v100_pairs_host, {}),
])
def test_the_index_alone_gives_the_planners_groups(tmp_path, build, pools):
    tree, _kernel = build(tmp_path / "root")
    found = pool_groups(model(tree), **pools)
    assert found == group_devices(model(tree), pools)
    assert set(found) == {"companions", "left_out", "shared"}


def test_the_groups_say_something_on_a_shared_group(tmp_path):
    # not a comparison of two empty answers: the V100 pairs leave 43:00.0 out for its group's other GPU
    tree, _kernel = v100_pairs_host(tmp_path / "root")
    found = pool_groups(model(tree), gpus=["0000:27:00.0", "0000:28:00.0", "0000:43:00.0"])
    assert "0000:43:00.0" in found["left_out"] and found["shared"]


@pytest.mark.parametrize("pools", [{"host_devices": NIC_PF}, {"host_devices": ["sound"]},
                                   {"vf_pfs": [NIC_PF]}])  # a PF without VFs
def test_a_bad_pool_is_refused_in_the_planners_words(tmp_path, pools):
    tree, _kernel = lab_host_with_nic(tmp_path / "root")
    with pytest.raises(InputError) as planner:
        group_devices(model(tree), pools)
    with pytest.raises(InputError) as index:
        pool_groups(model(tree), **pools)
    assert str(index.value) == str(planner.value)
