# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What systemd says of units, in one ``systemctl show`` per read: whether each is loaded, its
unit file state (what ``systemctl is-enabled`` prints) and its active state (what ``systemctl
is-active`` prints). One program for both answers, and for any number of units."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

UNIT_PROPERTIES = "Id,LoadState,UnitFileState,ActiveState"


def show_argv(systemctl, units):
    """``systemctl show -p Id,LoadState,UnitFileState,ActiveState UNIT...``."""
    return [systemctl, "show", "-p", UNIT_PROPERTIES] + list(units)


def parse_systemctl_show(text):
    """``systemctl show -p ... UNIT...`` (``Key=Value`` lines in systemctl's own order, one blank
    line between units) -> [{Id, LoadState, UnitFileState, ActiveState}], one per unit in the
    order asked. A unit that does not exist is listed too (``LoadState=not-found``, an empty
    ``UnitFileState``); nothing is listed where systemd is not running (exit status 1)."""
    units, current = [], {}
    for line in (text or "").splitlines() + [""]:
        if not line.strip():
            if current.get("Id"):
                units.append(current)
            current = {}
            continue
        key, _sep, value = line.partition("=")
        current[key.strip()] = value.strip()
    return units


def units_by_id(text):
    """:func:`parse_systemctl_show` by unit name (``Id``: ``libvirtd.service``)."""
    return dict((unit["Id"], unit) for unit in parse_systemctl_show(text))
