# -*- coding: utf-8 -*-
"""The AWX job templates as code: survey specs valid for AWX, wired to variables the
playbooks read, and awx/job_templates.yml accepted by ansible-playbook --syntax-check."""

from __future__ import annotations

import copy
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
from survey_spec import SurveyError, answers, validate_spec  # noqa: E402  pylint: disable=import-error,wrong-import-position

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SURVEYS = sorted(glob.glob(os.path.join(REPO, "awx", "surveys", "*.json")))
PLAYBOOK = os.path.join(REPO, "awx", "job_templates.yml")
AWX_COLLECTION = os.path.join(REPO, ".build", "collections", "ansible_collections", "awx", "awx")


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def read_all(*patterns):
    text = []
    for pattern in patterns:
        for path in glob.glob(os.path.join(REPO, pattern), recursive=True):
            with open(path, encoding="utf-8") as handle:
                text.append(handle.read())
    return "\n".join(text)


def test_there_is_a_survey_per_template_and_the_workflow():
    assert sorted(os.path.basename(p) for p in SURVEYS) == ["bringup.json", "guests.json", "preflight.json", "tenants.json", "workflow.json"]


@pytest.mark.parametrize("path", SURVEYS, ids=os.path.basename)
def test_survey_is_valid_for_awx(path):
    assert validate_spec(load(path))


@pytest.mark.parametrize("path", SURVEYS, ids=os.path.basename)
def test_every_survey_variable_is_read_by_the_playbooks_or_roles(path):
    code = read_all("playbooks/**/*.yml", "roles/**/*.yml")
    for question in load(path)["spec"]:
        assert question["variable"] in code, "%s: nothing reads %s" % (os.path.basename(path), question["variable"])


def test_operator_questions_are_asked():
    """Hosts limit, reboot allowed, batch size and tenant list, as the fleet needs."""
    workflow = set(q["variable"] for q in load(os.path.join(REPO, "awx", "surveys", "workflow.json"))["spec"])
    assert {"gpuvirt_hosts_limit", "gpuvirt_reboot_ok", "gpuvirt_serial", "gpuvirt_survey_tenants",
            "gpuvirt_max_fail_percentage", "gpuvirt_reboot_budget"} <= workflow
    bringup = dict((q["variable"], q) for q in load(os.path.join(REPO, "awx", "surveys", "bringup.json"))["spec"])
    assert bringup["gpuvirt_reboot_ok"]["default"] == "false"  # no reboot unless the operator says so
    assert bringup["gpuvirt_max_fail_percentage"]["default"] == 0


def _bad(mutate):
    spec = copy.deepcopy(load(os.path.join(REPO, "awx", "surveys", "bringup.json")))
    mutate(spec)
    return spec


@pytest.mark.parametrize("mutate, match", [
    (lambda s: s.pop("description"), "'description' is missing"),
    (lambda s: s.update(spec=[]), "doesn't contain any items"),
    (lambda s: s["spec"][0].pop("required"), "'required' missing"),
    (lambda s: s["spec"][0].update(required="yes"), "expected to be bool"),
    (lambda s: s["spec"][1].update(variable=s["spec"][0]["variable"]), "duplicated"),
    (lambda s: s["spec"][0].update(type="string"), "allowed question types"),
    (lambda s: s["spec"][3].update(default="0"), "expected to be integer"),
    (lambda s: s["spec"][3].update(max="100"), "limit in survey question 3 expected to be integer"),
    (lambda s: s["spec"][1].pop("choices"), "must specify choices"),
    (lambda s: s["spec"][1].update(default="maybe"), "Default choice must be answered from the choices"),
    (lambda s: s["spec"][1].update(default="true\nfalse"), "only have one default"),
    (lambda s: s["spec"][4].update(default=0), "not between 1 and 1000"),
    (lambda s: s["spec"][0].update(variable="gpuvirt-hosts"), "not a variable name"),
])
def test_validator_rejects_what_awx_rejects(mutate, match):
    with pytest.raises(SurveyError, match=match):
        validate_spec(_bad(mutate))


def test_answers_are_the_extra_vars_of_a_launch():
    spec = load(os.path.join(REPO, "awx", "surveys", "workflow.json"))
    extra = answers(spec, {"gpuvirt_serial": "25%", "gpuvirt_reboot_ok": "true"})
    assert extra["gpuvirt_serial"] == "25%" and extra["gpuvirt_reboot_ok"] == "true"
    assert extra["gpuvirt_max_fail_percentage"] == 0 and "gpuvirt_survey_tenants" not in extra
    for overrides, match in (({"gpuvirt_reboot_ok": "yes"}, "not one of"), ({"gpuvirt_reboot_budget": 0}, "between"),
                             ({"gpuvirt_nope": 1}, "no survey question"), ({"gpuvirt_hosts_limit": ""}, "value missing")):
        with pytest.raises(SurveyError, match=match):
            answers(spec, overrides)


def test_job_templates_playbook_uses_every_survey_and_chains_the_workflow():
    with open(PLAYBOOK, encoding="utf-8") as handle:
        play = yaml.safe_load(handle)[0]
    templates = play["vars"]["gpuvirt_awx_templates"]
    used = set(t["survey"] for t in templates) | {"workflow.json"}
    assert used == set(os.path.basename(p) for p in SURVEYS)
    for template in templates:
        assert os.path.exists(os.path.join(REPO, "awx", "project", template["playbook"])), template["playbook"]
    assert [t["job_type"] for t in templates][0] == "check"  # preflight runs in check mode
    modules = [next(k for k in task if "." in k) for task in play["tasks"]]
    assert modules == ["ansible.builtin.assert", "ansible.builtin.stat", "ansible.builtin.assert", "awx.awx.credential",
                       "awx.awx.credential", "ansible.builtin.fail", "awx.awx.execution_environment", "awx.awx.project",
                       "awx.awx.inventory", "awx.awx.inventory_source", "awx.awx.job_template", "awx.awx.workflow_job_template"]
    nodes = play["tasks"][-1]["awx.awx.workflow_job_template"]["workflow_nodes"]
    chain = [(n["identifier"], [s["identifier"] for s in (n.get("related") or {}).get("success_nodes", [])]) for n in nodes]
    assert chain == [("preflight", ["bring-up"]), ("bring-up", ["tenants"]), ("tenants", ["guests"]), ("guests", [])]


def test_job_templates_playbook_passes_syntax_check():
    assert os.path.isdir(AWX_COLLECTION), "awx.awx is missing from .build/collections: run scripts/bootstrap.sh"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build", "collections"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    proc = subprocess.run(["ansible-playbook", "--syntax-check", PLAYBOOK], capture_output=True, text=True, cwd=REPO, env=env,
                          check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "playbook: " in proc.stdout
