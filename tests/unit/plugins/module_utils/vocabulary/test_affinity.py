# -*- coding: utf-8 -*-
"""PCIe affinity levels as nvidia-smi topo -m prints them (tests/fixtures/topo), nearest first."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.affinity import LEVELS, rank


def test_levels_nearest_first():
    assert LEVELS == ("PIX", "PXB", "PHB", "NODE", "SYS")
    assert [rank(level) for level in LEVELS] == [0, 1, 2, 3, 4]


def test_unknown_level_is_farthest():
    assert rank("NV12") == len(LEVELS) and rank(None) == len(LEVELS)
