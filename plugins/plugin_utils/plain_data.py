# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side helpers of the filters and the actions: plain Python data from what ansible-core
hands a filter, and a flag as a play hands it over."""

from __future__ import absolute_import, division, print_function

import json

__metaclass__ = type


def plain(value):
    """``value`` as plain dicts, lists, strings and numbers. ansible-core 2.19 hands filters lazily
    templated containers: walking or deep-copying a large host model through them costs seconds
    (measured: 48 s for one preview of the DGX A100-class capture); one JSON round trip costs
    milliseconds and leaves the filter's pure code the data it was written for."""
    return json.loads(json.dumps(value))


def play_true(value):
    """Whether a flag a play hands over is set: a bool, or its text as a fact or an extra var gives
    it (true, yes, 1, any case); anything else false."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value)
