# -*- coding: utf-8 -*-
"""fabric_partition against tests/unit/fakes/standins/fmpm, a STAND-IN for NVIDIA's fmpm: it prints what
fmpm's source (NVIDIA/Fabric-Manager-Client fmpm.cpp) prints, through jsoncpp's StyledWriter layout, and
keeps the partitions' state as the Fabric Manager would (FM_ST_IN_USE for a partition whose GPUs another
active one holds). The board's partitions are the published HGX H100-class listing (fakes.fabric)."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import fabric_partition
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric import fmpm
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from conftest import run_module  # pylint: disable=import-error
from fakes.fabric import STANDIN, h100_state, read_state, write_state  # pylint: disable=import-error
from fakes.system_commands import SystemCommands  # pylint: disable=import-error


@pytest.fixture
def fabric(tmp_path, monkeypatch):
    path = tmp_path / "fmpm.json"
    write_state(str(path), h100_state(active=(6,)))
    monkeypatch.setenv("FMPM_STANDIN_STATE", str(path))
    return str(path)


def call(tmp_path, partitions, **kwargs):
    commands = SystemCommands()
    result = run_module(fabric_partition.main, {"partitions": partitions, "fmpm": STANDIN}, host=Host(str(tmp_path), commands=commands),
                        **kwargs)
    return result, commands


def changing(state_path):
    return [c for c in read_state(state_path).get("calls", []) if c[:1] in (["-a"], ["-d"])]


def test_the_standins_listing_has_the_layout_of_fmpms_source(fabric):
    """The JSON of fmpm.cpp's listPartitions as jsoncpp's StyledWriter writes it: keys in byte order, three
    spaces a level, `"key" : value`, one newline at the end; version fmFabricPartitionList_version."""
    out = subprocess.run([STANDIN, "-l"], capture_output=True, text=True, check=True).stdout
    lines = out.split("\n")
    assert lines[:4] == ["{", '   "maxNumPartitions" : 64,', '   "numPartitions" : 15,', '   "partitionInfo" : [']
    assert lines[4:8] == ["      {", '         "gpuInfo" : [', "            {", '               "maxNumNvLinks" : 18,']
    assert lines[8:13] == ['               "numNvLinksAvailable" : 18,', '               "nvlinkLineRateMBps" : 0,',
                           '               "pciBusId" : "0000:c3:00.0",', '               "physicalId" : 1,', '               "uuid" : ""']
    # one newline after the closing brace, as StyledWriter ends its document and fmpm prints it with "%s"
    assert lines[-4:] == ["   ],", '   "version" : 16909068', "}", ""]
    listed = fmpm.parse_list(out)
    assert sorted(listed) == list(range(15))
    assert listed[6] == {"active": True, "physical_ids": [6, 8], "gpus": ["0000:61:00.0", "0000:1b:00.0"]}


def test_activates_a_free_partition_then_changes_nothing(fabric, tmp_path):
    result, _commands = call(tmp_path, [{"id": 3, "physical_ids": [3, 1]}], diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is True and result["activated"] == [3] and result["deactivated"] == []
    assert result["partitions"]["3"]["active"] is True
    assert result["diff"][0]["before"] == "partition 6: physical IDs 6, 8\n"
    assert result["diff"][0]["after"] == "partition 3: physical IDs 1, 3\npartition 6: physical IDs 6, 8\n"
    assert changing(fabric) == [["-a", "3"]]
    again, _commands = call(tmp_path, [{"id": 3}])
    assert again["changed"] is False and changing(fabric) == [["-a", "3"]]


def test_check_mode_changes_no_partition(fabric, tmp_path):
    result, _commands = call(tmp_path, [{"id": 6, "state": "inactive"}, {"id": 2}], check_mode=True)
    assert result["changed"] is True and result["deactivated"] == [6] and result["activated"] == [2]
    assert changing(fabric) == [] and read_state(fabric)["partitions"][6]["isActive"] == 1


def test_deactivation_runs_first_so_a_larger_partition_can_take_its_gpus(fabric, tmp_path):
    result, _commands = call(tmp_path, [{"id": 2, "physical_ids": [5, 6, 7, 8]}, {"id": 6, "state": "inactive"}])
    assert not result.get("failed"), result
    assert changing(fabric) == [["-d", "6"], ["-a", "2"]]
    assert result["partitions"]["2"]["active"] is True and result["partitions"]["6"]["active"] is False


def test_a_partition_whose_gpus_an_active_one_holds_is_refused_before_any_step(fabric, tmp_path):
    result, _commands = call(tmp_path, [{"id": 11}, {"id": 2}])
    assert result.get("failed") and result["msg"].startswith(
        "partition 2 (physical IDs 5, 6, 7, 8) cannot be activated: partition 6 (physical IDs 6, 8) is active and holds GPUs 6, 8; "
        "deactivate it first"), result
    assert changing(fabric) == []


def test_two_partitions_asked_that_share_gpus_are_refused(fabric, tmp_path):
    result, _commands = call(tmp_path, [{"id": 1}, {"id": 3}])
    assert result.get("failed") and "partition 3 (physical IDs 1, 3) cannot be activated: partition 1 (physical IDs 1, 2, 3, 4) is to be " \
        "activated too" in result["msg"], result
    assert changing(fabric) == []


@pytest.mark.parametrize("partitions, message", [
    ([{"id": 20}], "partitions[0]: partition 20 is not in the Fabric Manager's list (fmpm -l lists 0, 1, 2,"),
    ([{"id": 3, "physical_ids": [1, 2]}], "partitions[0]: partition 3 holds the GPUs of physical IDs 1, 3 on this board, not 1, 2"),
    ([{"id": 3}, {"id": 3, "state": "inactive"}], "partitions[1]: partition 3 is also partitions[0]"),
    ([{"id": 64}], "partitions[0].id: 64 is no Fabric Manager partition ID (0-63"),
])
def test_bad_partitions_are_refused_and_nothing_changes(fabric, tmp_path, partitions, message):
    result, _commands = call(tmp_path, partitions)
    assert result.get("failed") and message in result["msg"], result
    assert result.get("changed") is False and changing(fabric) == []


def test_the_standin_refuses_as_the_fabric_manager_does_in_fmpms_words(fabric):
    """What fabric_partition decides against is what the stand-in would refuse: FM_ST_IN_USE (-7) for a
    partition whose GPUs an active one holds, FM_ST_UNINITIALIZED (-4) to deactivate one not active,
    FM_ST_BADPARAM (-1) for one not listed, printed as fmpm.cpp prints them, the status the fmReturn_t."""
    for argv, status, text in ((["-a", "14"], -7, "Failed to activate partition. fmReturn: -7\n"),
                               (["-d", "3"], -4, "Failed to deactivate partition. fmReturn: -4\n"),
                               (["-a", "40"], -1, "Failed to activate partition. fmReturn: -1\n"),
                               (["-a", "64"], -1, "Invalid Partition ID.\n")):
        out = subprocess.run([STANDIN] + argv, capture_output=True, text=True, check=False)
        assert (out.returncode, out.stdout) == (status & 0xff, text), argv
    assert read_state(fabric)["partitions"][14]["isActive"] == 0


def test_fmpm_not_executable_is_refused(fabric, tmp_path):
    result = run_module(fabric_partition.main, {"partitions": [{"id": 3}], "fmpm": str(tmp_path)}, host=Host(str(tmp_path)))
    assert result.get("failed") and "fmpm: %s is not an executable file" % tmp_path in result["msg"]


def test_output_that_is_no_listing_is_a_clear_error():
    with pytest.raises(Exception) as failure:
        fmpm.parse_list("Failed to connect to Fabric Manager instance.\n")
    assert "fmpm -l printed no partition list the collection reads" in str(failure.value)
