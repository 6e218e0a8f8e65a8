# -*- coding: utf-8 -*-
"""preflight_text: the batches around a stopped batch, from the play's hosts in rollout order."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.text import batches_around


@pytest.mark.parametrize("batch, play_hosts, expected", [
    (["h3", "h4"], ["h1", "h2", "h3", "h4", "h5"], (["h1", "h2"], ["h5"])),
    (["h1"], ["h1", "h2"], ([], ["h2"])),
    (["h2"], ["h1", "h2"], (["h1"], [])),
    (["lab"], ["lab"], ([], [])),
    # a batch the play does not list (a host added at run time), or none: no batches around it
    (["new"], ["h1", "h2"], ([], [])),
    ([], ["h1"], ([], [])),
])
def test_batches_around(batch, play_hosts, expected):
    assert batches_around(batch, play_hosts) == expected
