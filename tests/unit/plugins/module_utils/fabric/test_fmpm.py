# -*- coding: utf-8 -*-
"""fabric/fmpm.py, pure: the steps decided over a listing as fmpm -l gives it (read by parse_list from the
stand-in's output, tests/unit/fakes/standins/fmpm, which prints what fmpm's source prints)."""

from __future__ import annotations

import subprocess

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric import fmpm
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError

from fakes.fabric import STANDIN, h100_state, write_state  # pylint: disable=import-error


@pytest.fixture
def listed(tmp_path, monkeypatch):
    def make(active=()):
        path = tmp_path / ("fmpm-%s.json" % "-".join(map(str, active)))
        write_state(str(path), h100_state(active=active))
        monkeypatch.setenv("FMPM_STANDIN_STATE", str(path))
        return fmpm.parse_list(subprocess.run([STANDIN, "-l"], capture_output=True, text=True, check=True).stdout)
    return make


def wanted(*entries):
    return [dict({"state": "active", "physical_ids": None}, **entry) for entry in entries]


def test_the_listing_read_has_every_partition_with_its_physical_ids(listed):
    partitions = listed(active=(1, 5))
    assert [n for n, p in sorted(partitions.items()) if p["active"]] == [1, 5]
    assert partitions[0]["physical_ids"] == list(range(1, 9)) and partitions[14]["physical_ids"] == [8]


def test_nothing_to_do_where_the_states_hold(listed):
    assert fmpm.decide(listed(active=(3,)), wanted({"id": 3}, {"id": 4, "state": "inactive"})) == []


def test_deactivations_come_first_and_free_the_gpus_of_the_activations(listed):
    steps = fmpm.decide(listed(active=(3, 4)), wanted({"id": 1}, {"id": 3, "state": "inactive"}, {"id": 4, "state": "inactive"}))
    assert steps == [("deactivate", 3), ("deactivate", 4), ("activate", 1)]


def test_an_active_partition_not_named_keeps_its_gpus(listed):
    with pytest.raises(StateError, match="partition 9 .* cannot be activated: partition 3 .* is active and holds GPUs 3"):
        fmpm.decide(listed(active=(3,)), wanted({"id": 9}))


def test_single_gpu_partitions_beside_each_other_are_fine(listed):
    assert fmpm.decide(listed(), wanted({"id": 7}, {"id": 8}, {"id": 5})) == [("activate", 7), ("activate", 8), ("activate", 5)]


def test_the_planned_physical_ids_must_be_the_listed_ones(listed):
    with pytest.raises(InputError, match="partition 5 holds the GPUs of physical IDs 5, 7 on this board, not 5, 6"):
        fmpm.decide(listed(), wanted({"id": 5, "physical_ids": [6, 5]}))
    assert fmpm.decide(listed(), wanted({"id": 5, "physical_ids": [7, 5]})) == [("activate", 5)]


def test_the_diff_text_and_the_state_after(listed):
    partitions = listed(active=(6,))
    steps = [("deactivate", 6), ("activate", 2)]
    assert fmpm.render_active(partitions) == "partition 6: physical IDs 6, 8\n"
    assert fmpm.render_active(fmpm.after(partitions, steps)) == "partition 2: physical IDs 5, 6, 7, 8\n"
    assert partitions[6]["active"] is True


def test_an_entry_with_a_label_is_named_by_it_and_the_way_to_free_a_partition_is_the_callers(listed):
    """The tenants stage labels each partition with its tenant and says how it frees one (fmpm.decide's ``free``)."""
    with pytest.raises(InputError, match=r"^tenant t-a: partition 20 is not in the Fabric Manager's list"):
        fmpm.decide(listed(), wanted({"id": 20, "label": "tenant t-a"}))
    with pytest.raises(StateError, match=r"^tenant t-b: partition 9 \(physical IDs 3\) cannot be activated: partition 3 \(physical IDs 1, 3\) "
                                         r"is active and holds GPUs 3; remove its tenant; nothing was changed$"):
        fmpm.decide(listed(active=(3,)), wanted({"id": 9, "label": "tenant t-b"}), "remove its tenant")
    with pytest.raises(StateError, match=r"partition 3 \(physical IDs 1, 3\) is to be activated too \(tenant t-c\)"):
        fmpm.decide(listed(), wanted({"id": 3, "label": "tenant t-c"}, {"id": 9, "label": "tenant t-d"}))
