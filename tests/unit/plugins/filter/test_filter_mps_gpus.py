# -*- coding: utf-8 -*-
"""The mps_gpus filter: what it hands to the gpu_mps role, and a clear error for unreadable output."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.mps_gpus import FilterModule

MPS_GPUS = FilterModule().filters()["mps_gpus"]


def test_empty_output_selects_nothing():
    assert MPS_GPUS("", "") == {"gpus": [], "requested": [], "missing": [], "conflicts": [], "selected": []}


def test_unreadable_output_names_the_filter():
    with pytest.raises(AnsibleFilterError, match="gpuvirt.tenancy.mps_gpus"):
        MPS_GPUS("0, 00000000:01:00.0\n", "")
