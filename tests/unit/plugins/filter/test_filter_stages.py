# -*- coding: utf-8 -*-
"""The stage record filters as the host stage roles call them: the digest a stage sends is the
one module_utils computes, and the gate's check is taken only when it answers these options."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.stages import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.stage_record import options_digest

FILTERS = FilterModule().filters()
OPTIONS = {"devices": ["0000:82:00.0"], "vfs_of": ["0000:81:00.0"], "persist": True}


def test_digest_is_the_records():
    assert FILTERS["stage_digest"](OPTIONS) == options_digest(dict(reversed(list(OPTIONS.items()))))


def test_check_result_answers_only_its_options():
    result = {"changed": False, "devices": []}
    check = {"recorded": True, "module": "vfio_bind", "digest": options_digest(OPTIONS), "changed": False,
             "result": result, "error": None}
    assert FILTERS["stage_check_result"](check, OPTIONS) == result
    assert FILTERS["stage_check_result"](check, dict(OPTIONS, persist=False)) == {}
    assert FILTERS["stage_check_result"](None, OPTIONS) == {}
    assert FILTERS["stage_check_result"]({}, OPTIONS) == {}


@pytest.mark.parametrize("name, args, message", [
    ("stage_digest", (["a"],), "gpuvirt.tenancy.stage_digest: expected the dict of a module call's options, got list"),
    ("stage_check_result", ("x", {}), "gpuvirt.tenancy.stage_check_result: expected one stage of preflight_info's stage_checks"),
    ("stage_check_result", ({}, None), "gpuvirt.tenancy.stage_check_result: expected the dict of a module call's options, got NoneType"),
])
def test_bad_inputs_are_named(name, args, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FILTERS[name](*args)
