# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host index and NVSwitch board built once per host model (placement/index_cache.py): the same
model in distinct dicts shares one index and board, any change to what the index reads (a value, its type) makes another, a
change to the caller's dict after a plan never reaches a kept index, and plans are those made
without the cache."""

from __future__ import annotations

import copy
import json
import random

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import index_cache
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.partitions import board_of
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import Planner, plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

import placement_families as families  # pylint: disable=import-error
from placement_topologies import dgx_a100, grouped, synthetic  # pylint: disable=import-error

POLICY = {"reserved_cpus": "0-1,128-129"}
TENANTS = [{"name": "t%d" % i, "vcpus": 4 + 2 * i, "memory_mb": 8192, "gpus": i % 3, "vfs": i % 2} for i in range(16)]


@pytest.fixture(autouse=True)
def _fresh():
    index_cache.forget()
    yield
    index_cache.forget()


def _planner(topology, policy=None):
    """A Planner with the kept index: a key's first plan builds an index of its own, the second keeps one."""
    Planner(topology, policy)
    return Planner(topology, policy)


def _index(topology, policy=None):
    return _planner(topology, policy).host


def _uncached(topology, tenants, policy=None):
    """The plan as made without the cache (each plan its own index)."""
    index_cache.forget()
    plan = plan_tenants(topology, tenants, policy)
    index_cache.forget()
    return plan


def _state(index):
    """What an index holds, its rank rows, notes and nearer VFs (filled as asked) left out."""
    return dict((name, value) for name, value in vars(index).items() if name not in ("_rank_rows", "notes", "nearer_vfs"))


def test_one_model_in_distinct_dicts_shares_one_index_from_its_second_plan_on():
    first, second, third = dgx_a100(), dgx_a100(), dgx_a100()
    assert first is not second
    alone = Planner(first, POLICY).host
    kept = Planner(second, POLICY).host
    assert alone is not kept and _state(alone) == _state(kept)
    assert Planner(third, POLICY).host is kept


def test_equal_topologies_whose_strings_are_shared_apart_get_an_index_each_and_the_same_plans():
    # marshal flags an object more than one reference points to: a copy sharing the strings of its
    # original (copy.deepcopy) writes apart from a topology read alike on its own
    original = dgx_a100()
    kept = _index(original, POLICY)
    shared = copy.deepcopy(original)
    assert shared == original and _index(shared, POLICY) is not kept
    alone = json.dumps(_uncached(dgx_a100(), TENANTS, POLICY), sort_keys=True)
    assert json.dumps(plan_tenants(shared, TENANTS, POLICY), sort_keys=True) == alone


def test_hosts_read_from_json_documents_share_one_index():
    text = json.dumps(dgx_a100())
    kept = _index(json.loads(text), POLICY)
    assert all(_index(json.loads(text), POLICY) is kept for _try in range(3))


def _running(free):
    """The DGX model with ``free`` 2M pages free on node 0 (tenants running)."""
    topology = dgx_a100()
    pools = topology["numa_nodes"][0]["hugepages"]
    size = next(iter(pools))
    pools[size] = dict(pools[size], free=free)
    return topology


def test_hosts_of_one_model_with_other_pages_free_share_one_index():
    kept = _index(_running(0), POLICY)
    assert all(_index(_running(free), POLICY) is kept for free in (1, 7, 16384))
    assert _state(kept) == _state(HostIndex(_running(5)))
    # the total is read: another total, another index
    other = _running(0)
    pools = other["numa_nodes"][0]["hugepages"]
    pools[next(iter(pools))]["total"] = 8192
    assert _index(other, POLICY) is not kept and _index(other, POLICY).hugepages[0] == HostIndex(other).hugepages[0]


@pytest.mark.parametrize("pools", [[1], {"2048kB": None}, {"2048kB": {"free": 3}}, {"2048kB": {}}], ids=["list", "none", "no-total", "empty"])
def test_pools_of_other_shapes_read_as_the_index_reads_them(pools):
    topology = dgx_a100()
    topology["numa_nodes"][0]["hugepages"] = pools
    try:
        alone = _state(HostIndex(copy.deepcopy(topology)))
    except Exception as exc:  # pylint: disable=broad-except
        with pytest.raises(type(exc)):
            _index(topology, POLICY)
        return
    assert _state(_index(topology, POLICY)) == alone


def test_a_fleet_of_hosts_that_all_differ_keeps_no_index():
    for memory in range(index_cache.MOST_SEEN + 4):
        Planner(dgx_a100(memory_mb=65536 + memory), POLICY)
    assert not index_cache._MODELS and len(index_cache._SEEN) == index_cache.MOST_SEEN  # pylint: disable=protected-access


def test_the_pools_asked_for_are_part_of_the_key():
    topology = dgx_a100()
    every = _index(topology, POLICY)
    two = _index(topology, dict(POLICY, gpus=every.gpus[:2]))
    assert two is not every and two.gpus == every.gpus[:2]
    assert _index(topology, dict(POLICY, host_devices=[every.gpus[0]])) is not every


def test_a_changed_value_makes_another_index_equal_to_one_built_alone():
    topology = dgx_a100()
    before = _index(topology, POLICY)
    gpu = topology["gpus"][0]
    gpu["numa_node"] = (gpu["numa_node"] + 1) % 8
    after = _index(topology, POLICY)
    assert after is not before
    assert after.gpu_node[gpu["address"]] == gpu["numa_node"] != before.gpu_node[gpu["address"]]
    assert _state(after) == _state(HostIndex(topology))


@pytest.mark.parametrize("value", [True, 1.0])
def test_a_value_equal_but_of_another_type_makes_another_index(value):
    # True == 1 == 1.0, but the index reads a bool as no node (node_of) where it reads 1 as node 1
    topology = dgx_a100()
    plain = _index(topology, POLICY)
    other = copy.deepcopy(topology)
    next(gpu for gpu in other["gpus"] if gpu["numa_node"] == 1)["numa_node"] = value
    assert other == topology
    typed = _index(other, POLICY)
    assert typed is not plain
    assert _state(typed) == _state(HostIndex(other))


def test_the_callers_dict_changed_after_a_plan_never_reaches_the_kept_index():
    topology = dgx_a100()
    kept = _index(topology, POLICY)
    plan_tenants(topology, TENANTS, POLICY)
    # no list or dict of the index, its rank rows included, is one of the topology's
    assert kept._rank_rows  # pylint: disable=protected-access
    held = _containers(vars(kept), {})
    for row in kept._rank_rows.values():  # pylint: disable=protected-access
        _containers([row.levels, row.pf_vfs, row.vf_pf, row.vf_node, row.socket], held)
    assert not set(_containers(topology, {})) & set(held)
    saved = copy.deepcopy(_state(kept))
    gpu = kept.gpus[0]
    # the parts of the caller's topology an index built from it held before it kept copies: the
    # affinity matrix's rows, a PF's VF list
    topology["gpu_nic_affinity"][gpu].clear()
    pf = next(address for address, dev in topology["pci_devices"].items() if dev.get("virtfns"))
    topology["pci_devices"][pf]["virtfns"].clear()
    assert _state(kept) == saved
    assert _index(dgx_a100(), POLICY) is kept


def test_a_value_marshal_does_not_write_makes_no_key():
    class Address(str):
        pass

    topology = dgx_a100()
    topology["gpus"][0]["address"] = Address(topology["gpus"][0]["address"])
    first, second = _index(topology, POLICY), _index(topology, POLICY)
    assert first is not second
    assert _state(first) == _state(second)


def test_a_bad_topology_raises_each_time_and_is_not_kept():
    topology = dgx_a100()
    topology["numa_nodes"] = []
    for _try in range(2):
        with pytest.raises(InputError, match="numa_nodes is empty"):
            _index(topology)
    with pytest.raises(InputError, match="policy.gpus"):
        _index(dgx_a100(), {"gpus": ["0000:ff:00.0"]})
    assert not index_cache._MODELS  # pylint: disable=protected-access


def test_past_the_most_models_the_oldest_goes():
    models = [synthetic(1, [4 + size], 2, [1], [1], [64]) for size in range(index_cache.MOST_MODELS + 1)]
    first = _index(models[0])
    for model in models[1:index_cache.MOST_MODELS]:
        _index(model)
    assert _index(models[0]) is first
    _index(models[-1])
    assert len(index_cache._MODELS) == index_cache.MOST_MODELS  # pylint: disable=protected-access
    assert _index(models[0]) is not first


def test_a_boards_model_shares_its_board_and_its_module_ids_are_part_of_the_key():
    topology, tenants, policy, _partitions = families.nvswitch_board(random.Random(31))
    planner = _planner(topology, policy)
    assert planner.board is not None and planner.board.partitions
    # the same model drawn again (its policy, which names the GPUs by the topology's strings, kept alike)
    fresh = families.nvswitch_board(random.Random(31))
    again = Planner(fresh[0], fresh[2])
    assert again.host is planner.host and again.board is planner.board
    unknown = _planner(topology, dict(policy, gpu_modules=None))
    assert unknown.board is not planner.board and not unknown.board.partitions
    assert vars(board_of(topology, policy["gpu_modules"])) == vars(planner.board)
    alone = json.dumps(_uncached(topology, tenants, policy), sort_keys=True)
    for _try in range(2):
        assert json.dumps(plan_tenants(fresh[0], tenants, fresh[2]), sort_keys=True) == alone
    with pytest.raises(InputError, match="no NVSwitch"):
        Planner(dgx_a100(), dict(POLICY, gpu_modules={"0000:10:00.0": 1}))


class _Reads(dict):
    """A topology that records the top-level keys read of it."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


GROUPED = grouped(synthetic(1, [8], 2, [2], [2], [256]), {7: ["0000:10:00.0", "0000:10:00.1"]},
                  {"0000:10:00.1": {"class": "0x040300", "numa_node": 0}})


@pytest.mark.parametrize("topology", [dgx_a100(), families.nvswitch_board(random.Random(31))[0], GROUPED], ids=["dgx", "nvswitch", "grouped"])
def test_the_index_and_the_board_read_only_the_keys_of_the_key(topology):
    recorder = _Reads(topology)
    HostIndex(recorder, None, None, {"0000:00:01.0": None})
    board_of(recorder, None)
    assert recorder.read and recorder.read <= set(index_cache.INDEX_READS)


def _containers(value, found):
    if isinstance(value, (dict, list, set)):
        found[id(value)] = value
        for item in (value.items() if isinstance(value, dict) else value):
            _containers(item, found)
    elif isinstance(value, tuple):
        for item in value:
            _containers(item, found)
    return found


def test_a_plan_holds_none_of_the_kept_indexs_lists_or_dicts():
    topology = dgx_a100()
    plan = plan_tenants(topology, TENANTS, POLICY)
    kept = _index(topology, POLICY)
    held = _containers(vars(kept), {})
    assert not set(_containers(plan, {})) & set(held)


def test_plans_are_those_made_without_the_cache_whatever_the_caller_does_with_them():
    mixes = [TENANTS, TENANTS[:8], TENANTS[3:14]]
    alone = [json.dumps(_uncached(dgx_a100(), tenants, POLICY), sort_keys=True) for tenants in mixes]
    for tenants, expected in zip(mixes * 2, alone * 2):
        plan = plan_tenants(dgx_a100(), tenants, POLICY)
        assert json.dumps(plan, sort_keys=True) == expected
        for placement in plan["placements"].values():
            placement["gpus"].clear()
            placement["vf_pfs"].clear()
        for free in plan["free"].values():
            free["cpus"].clear()
    assert len(index_cache._MODELS) == 1  # pylint: disable=protected-access


def test_what_the_reasons_say_of_the_host_is_said_once_per_kept_index(monkeypatch):
    # a node without VFs: said for the plan that first asks, then read from the kept index
    tenants = [dict(tenant, vfs=2) for tenant in TENANTS]
    expected = _uncached(dgx_a100(), tenants, POLICY)
    kept = _index(dgx_a100(), POLICY)
    assert json.dumps(plan_tenants(dgx_a100(), tenants, POLICY), sort_keys=True) == json.dumps(expected, sort_keys=True)
    said = dict(kept.notes)
    assert any(key[0] == "no VF" for key in said)

    def refused(*args):
        raise AssertionError("said again: %r" % (args,))
    monkeypatch.setattr(Planner, "_no_vf_said", refused)
    monkeypatch.setattr(Planner, "_nodeless_said", refused)
    assert json.dumps(plan_tenants(dgx_a100(), tenants, POLICY), sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert kept.notes == said
    # an index of its own (a key seen once) says them for its plan
    index_cache.forget()
    with pytest.raises(AssertionError, match="said again"):
        plan_tenants(dgx_a100(), tenants, POLICY)


def test_the_nearer_vfs_a_tenants_vf_locality_names_are_worked_out_once_per_kept_index():
    rng = random.Random(7)
    mixes = [[dict(tenant, gpus=rng.choice([0, 1, 1, 2]), vfs=rng.choice([1, 2])) for tenant in TENANTS] for _mix in range(6)]
    expected = [json.dumps(_uncached(dgx_a100(), tenants, POLICY), sort_keys=True) for tenants in mixes]
    kept = _index(dgx_a100(), POLICY)
    for tenants, plan in zip(mixes, expected):
        assert json.dumps(plan_tenants(dgx_a100(), tenants, POLICY), sort_keys=True) == plan
    said = dict(kept.nearer_vfs)
    # some tenants' VFs are not the nearest of the pool (the reason names who holds the nearer ones)
    assert any(isinstance(origin, tuple) for origin, _worst in said)
    for (origin, worst), nearer in said.items():
        if isinstance(origin, tuple):
            ranks = [min(kept.rank_row(gpu)[vf] for gpu in origin) for vf in kept.vfs]
        else:
            ranks = [kept.node_level(origin, kept.vf_node[vf]) for vf in kept.vfs]
        assert nearer == [vf for vf, rank in zip(kept.vfs, ranks) if rank < worst]
    # asked again, read from the index: the same lists, none worked out anew
    for tenants, plan in zip(mixes, expected):
        assert json.dumps(plan_tenants(dgx_a100(), tenants, POLICY), sort_keys=True) == plan
    assert kept.nearer_vfs == said and all(kept.nearer_vfs[key] is said[key] for key in said)


def _variants():
    """Topologies that write alike or apart: models, a value changed, a value of another type, a value
    marshal does not write."""
    class Address(str):
        pass

    small = [synthetic(1, [4 + size], 2, [1], [1], [64]) for size in range(3)]
    typed = dgx_a100()
    next(gpu for gpu in typed["gpus"] if gpu["numa_node"] == 1)["numa_node"] = True
    moved = dgx_a100()
    moved["gpus"][0]["numa_node"] = (moved["gpus"][0]["numa_node"] + 1) % 8
    unwritten = dgx_a100()
    unwritten["gpus"][0]["address"] = Address(unwritten["gpus"][0]["address"])
    return small + [dgx_a100(), typed, moved, unwritten, _running(3)]


def test_the_last_plans_key_gives_the_pair_the_kept_pairs_give():
    # the last key compared first gives what the kept pairs give, in any order of models, the same
    # model in a row or not, the pools asked for alike or apart
    rng = random.Random(5)
    calls = []
    for _run in range(80):
        calls += [(rng.randrange(len(_variants())), rng.choice([None, 2]))] * rng.randint(1, 3)

    def pairs(last_first):
        # topologies of their own: a pair built from a caller's dict holds its strings, which then
        # write otherwise (marshal's reference flags), alike in both runs
        variants = _variants()
        index_cache.forget()
        got = []
        for which, pool in calls:
            topology = variants[which]
            if pool is not None:
                pool = sorted(HostIndex(topology).gpus)[:pool]
            if not last_first:
                del index_cache._LAST[:]  # pylint: disable=protected-access
            got.append(index_cache.host_model(topology, pool))
        return got

    fast, general = pairs(True), pairs(False)
    assert sum(a is b for a, b in zip(fast, fast[1:])) > 20  # the same model in a row, often
    for index, (pair, alone) in enumerate(zip(fast, general)):
        assert _state(pair[0]) == _state(alone[0]) and (pair[1] is None) == (alone[1] is None)
        # the same pairs shared as the kept pairs share them
        assert [pair is other for other in fast[:index]] == [alone is other for other in general[:index]]
