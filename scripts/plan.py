#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Plan tenants on a host from files: the placement planner outside Ansible.

  scripts/plan.py --topology topology.json --tenants tenants.yml [--policy policy.yml]

--topology: the `topology` of gpuvirt.tenancy.host_topology_info as JSON or YAML (a whole
registered result with a `topology` key is accepted too). --tenants: a list of tenants, or a
mapping with `gpuvirt_tenants` (an inventory group_vars file). --policy: the planner policy, or
a mapping with `gpuvirt_tenant_policy`. Prints the plan as JSON; exit status 1 when a tenant
could not be placed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, ".build", "collections"))

# pylint: disable=wrong-import-position
import yaml  # noqa: E402

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError  # noqa: E402
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants  # noqa: E402


def load(path, key):
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if isinstance(data, dict) and key in data:
        return data[key]
    return data


def main():
    parser = argparse.ArgumentParser(description="Plan tenants on a host (gpuvirt.tenancy placement planner).")
    parser.add_argument("--topology", required=True)
    parser.add_argument("--tenants", required=True)
    parser.add_argument("--policy")
    args = parser.parse_args()
    topology = load(args.topology, "topology")
    tenants = load(args.tenants, "gpuvirt_tenants")
    policy = load(args.policy, "gpuvirt_tenant_policy") if args.policy else {}
    try:
        plan = plan_tenants(topology, tenants, policy)
    except InputError as exc:
        print("plan: %s" % exc, file=sys.stderr)
        return 2
    json.dump(plan, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 1 if plan["unplaced"] else 0


if __name__ == "__main__":
    sys.exit(main())
