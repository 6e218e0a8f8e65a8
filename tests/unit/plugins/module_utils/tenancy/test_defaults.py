# -*- coding: utf-8 -*-
"""tenancy/defaults: the one reading of whether an entry of the tenant list stays."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records


@pytest.mark.parametrize("entry, stay", [
    ({"name": "a"}, True),
    ({"name": "a", "state": None}, True),
    ({"name": "a", "state": ""}, True),
    ({"name": "a", "state": "present"}, True),
    ({"name": "a", "state": "running"}, True),
    ({"name": "a", "state": "defined"}, True),
    ({"name": "a", "state": "absent"}, False),
    (None, False),
    ("a", False),
])
def test_which_entries_stay(entry, stay):
    assert stays(entry) is stay


def test_a_record_reads_the_same():
    kept, gone = tenant_records([{"name": "a", "vcpus": 1, "memory_mb": 64}, {"name": "b", "state": "absent"}])
    assert (stays(kept), kept.present, stays(gone), gone.present) == (True, True, False, False)
