# -*- coding: utf-8 -*-
"""vlan_id: one rule for a VLAN id, 1-4094 (0 for none where a VF's VLAN is cleared)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vlan_id import check_vlan


def test_ids_in_range():
    assert [check_vlan(v, "vlan") for v in (None, 1, 4094, "100")] == [None, 1, 4094, 100]
    assert check_vlan(0, "vfs[0].vlan", none_is_zero=True) == 0


@pytest.mark.parametrize("value, none_is_zero", [(0, False), (4095, False), (4095, True), (-1, True), (5000, False),
                                                 (True, False), (1.5, False), ("ten", False)])
def test_out_of_range_or_not_a_number_is_refused(value, none_is_zero):
    with pytest.raises(InputError, match=r"^vlan: .* is not a VLAN id"):
        check_vlan(value, "vlan", none_is_zero=none_is_zero)
