# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every tenant's network VF gets on its PF besides its MAC and VLAN: spoof checking on and
trust off, so that the guest cannot send with another MAC or VLAN, nor ask the PF for promiscuous
mode. The tenants stage gives them with each VF the planner picks for a tenant
(planning/tenant_plan.plan_vf_settings); this is their one definition (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

ISOLATION = {"spoofchk": True, "trust": False}
