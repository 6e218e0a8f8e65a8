# -*- coding: utf-8 -*-
"""Each role's README.md (Galaxy shows it as the role's page): it points at the role's
meta/argument_specs.yml, names only inputs the argument specs have, and its example play parses
and includes the role by its FQCN with variables that are inputs of the role."""

from __future__ import annotations

import os
import re

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLES = sorted(name for name in os.listdir(os.path.join(REPO, "roles")) if os.path.isdir(os.path.join(REPO, "roles", name)))


def options(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    return set(name for entry in specs.values() for name in (entry.get("options") or {}))


def problems(role, text):
    found = []
    if "meta/argument_specs.yml" not in text:
        found.append("no pointer to meta/argument_specs.yml")
    known = options(role)
    # Inputs named in the text: role-prefixed words in backquotes, but the outputs (set by the
    # role, listed under Outputs).
    section = text.split("## Outputs", 1)[1].split("##", 1)[0] if "## Outputs" in text else ""
    outputs = set(re.findall(r"`(%s_[a-z0-9_]+)`" % role, section))
    for word in sorted(set(re.findall(r"`(%s_[a-z0-9_]+)`" % role, text)) - outputs):
        if word not in known:
            found.append("%s is no input of the role" % word)
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    if not blocks:
        found.append("no example play")
    for block in blocks:
        includes = [task for play in yaml.safe_load(block) for task in play.get("tasks", [])
                    if "ansible.builtin.include_role" in task]
        if not any(task["ansible.builtin.include_role"]["name"] == "gpuvirt.tenancy." + role for task in includes):
            found.append("the example does not include gpuvirt.tenancy.%s" % role)
        for task in includes:
            found += ["example variable %s is no input of the role" % name for name in sorted(task.get("vars", {})) if name not in known]
    return found


@pytest.mark.parametrize("role", ROLES)
def test_role_readme(role):
    path = os.path.join(REPO, "roles", role, "README.md")
    assert os.path.isfile(path), "roles/%s has no README.md" % role
    with open(path, encoding="utf-8") as handle:
        assert problems(role, handle.read()) == []


def test_a_misnamed_input_is_found():
    with open(os.path.join(REPO, "roles", "host_sriov", "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    broken = text.replace("host_sriov_pfs:\n", "host_sriov_pf:\n").replace("`host_sriov_force`", "`host_sriov_forced`")
    assert problems("host_sriov", broken) == [
        "host_sriov_forced is no input of the role", "example variable host_sriov_pf is no input of the role"]
