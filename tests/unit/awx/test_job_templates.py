# -*- coding: utf-8 -*-
"""awx/job_templates.yml against the awx.awx modules it calls: each task's options are options of
that module's argument spec (read from the module's source in the awx.awx collection that
scripts/bootstrap.sh extracts into .build/collections), required options are given and literal
values are among the choices; so a misspelt field fails here, not on the first run against a
controller. And the objects work on first use: the credentials the templates use are created,
every template escalates privileges (the plays need root), the inventory source is a file of
the project, and no placeholder address is left."""

from __future__ import annotations

import ast
import copy
import os
import re
import subprocess
import sys

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOK = os.path.join(REPO, "awx", "job_templates.yml")
AWX = os.path.join(REPO, ".build", "collections", "ansible_collections", "awx", "awx", "plugins")
# Task keywords, not module options.
KEYWORDS = {"name", "loop", "loop_control", "no_log", "when", "register", "tags", "vars", "delegate_to", "ignore_errors"}
# The input fields of AWX's managed credential type Machine (kind ssh), as AWX defines it in
# awx/main/models/credential/__init__.py (ManagedCredentialType namespace 'ssh').
MACHINE_INPUTS = {"username", "password", "ssh_key_data", "ssh_public_key_data", "ssh_key_unlock",
                  "become_method", "become_username", "become_password"}
# The inputs of AWX's managed credential type Container Registry (namespace 'registry'), as AWX defines it there.
REGISTRY_INPUTS = {"host", "username", "password", "verify_ssl"}
ITEM = re.compile(r"^\{\{ item\.(\w+) \}\}$")


def _value(node):
    """A spec's dict(...) calls as dicts; other values literal where they can be, else None."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict":
        return dict((kw.arg, _value(kw.value)) for kw in node.keywords)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def argument_spec(module):
    """The argument spec of awx.awx.<module>: its main()'s `argument_spec = dict(...)` plus the
    connection options every awx.awx module takes (ControllerModule.AUTH_ARGSPEC)."""
    spec = {}
    for path, target in ((os.path.join(AWX, "modules", module + ".py"), "argument_spec"),
                         (os.path.join(AWX, "module_utils", "controller_api.py"), "AUTH_ARGSPEC")):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        found = [node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", None) == target for t in node.targets)]
        assert len(found) == 1, (path, target)
        spec.update(_value(found[0]))
    return spec


def problems(play):
    """What a controller would refuse in the play's awx.awx tasks."""
    found = []
    loops = play["vars"]
    for task in play["tasks"]:
        module = next((key for key in task if key.startswith("awx.awx.")), None)
        if module is None:
            continue
        spec = argument_spec(module.split(".")[-1])
        names = dict((alias, name) for name, option in spec.items() for alias in [name] + list(option.get("aliases") or []))
        args = task[module]
        assert set(task) - {module} <= KEYWORDS, task["name"]
        # A looped task: "{{ item.x }}" takes each loop entry's x.
        loop = loops.get(task["loop"].strip("{} "), [{}]) if "loop" in task else [{}]
        for key, value in args.items():
            if key not in names:
                found.append("%s: %s is no option of %s" % (task["name"], key, module))
                continue
            option = spec[names[key]]
            item = ITEM.match(value) if isinstance(value, str) else None
            values = [entry.get(item.group(1)) for entry in loop] if item else [value]
            for one in values:
                if option.get("choices") and isinstance(one, str) and "{{" not in one and one not in option["choices"]:
                    found.append("%s: %s=%s is not one of %s" % (task["name"], key, one, option["choices"]))
                if option.get("type") == "bool" and not isinstance(one, bool) and "{{" not in str(one):
                    found.append("%s: %s=%r is not a boolean" % (task["name"], key, one))
        for name, option in spec.items():
            if option.get("required") and not any(names.get(key) == name for key in args):
                found.append("%s: %s is required by %s" % (task["name"], name, module))
        if module == "awx.awx.credential" and args.get("credential_type") == "Machine":
            found += ["%s: %s is no input of a Machine credential" % (task["name"], key)
                      for key in sorted(set(args["inputs"]) - MACHINE_INPUTS)]
        elif module == "awx.awx.credential" and args.get("credential_type") == "Container Registry":
            found += ["%s: %s is no input of a Container Registry credential" % (task["name"], key)
                      for key in sorted(set(args["inputs"]) - REGISTRY_INPUTS)]
        elif module == "awx.awx.credential":
            found.append("%s: credential type %s is not checked here" % (task["name"], args.get("credential_type")))
    return found


@pytest.fixture(scope="module")
def play():
    assert os.path.isdir(AWX), "awx.awx is missing from .build/collections: run scripts/bootstrap.sh"
    with open(PLAYBOOK, encoding="utf-8") as handle:
        [only] = yaml.safe_load(handle)
    return only


def tasks_of(play, module):
    return [task for task in play["tasks"] if "awx.awx." + module in task]


def test_every_awx_task_matches_its_module_argument_spec(play):
    assert len([t for t in play["tasks"] if any(k.startswith("awx.awx.") for k in t)]) == 8
    assert problems(play) == []


@pytest.mark.parametrize("module, key, value, words", [
    ("job_template", "become_enabeld", True, "become_enabeld is no option of awx.awx.job_template"),
    ("inventory_source", "source", "git", "source=git is not one of"),
    ("project", "scm_update_on_launch", "yes please", "is not a boolean"),
    ("credential", "inputs", {"user_name": "x"}, "user_name is no input of a Machine credential"),
    ("execution_environment", "pull", "sometimes", "pull=sometimes is not one of"),
])
def test_a_misspelt_field_or_value_is_found(play, module, key, value, words):
    broken = copy.deepcopy(play)
    tasks_of(broken, module)[0]["awx.awx." + module][key] = value
    assert any(words in problem for problem in problems(broken)), problems(broken)


def test_a_missing_required_option_is_found(play):
    broken = copy.deepcopy(play)
    del tasks_of(broken, "inventory_source")[0]["awx.awx.inventory_source"]["inventory"]
    assert "inventory is required by awx.awx.inventory_source" in " ".join(problems(broken))


def test_templates_use_credentials_the_play_creates_and_escalate(play):
    created = set(entry["name"] for entry in play["vars"]["gpuvirt_awx_credentials"])
    used = set(entry["credential"] for entry in play["vars"]["gpuvirt_awx_templates"])
    assert used <= created and len(used) == 2
    [credential] = [task for task in tasks_of(play, "credential") if task["awx.awx.credential"]["credential_type"] == "Machine"]
    assert credential["loop"] == "{{ gpuvirt_awx_credentials }}" and credential["no_log"] is True
    assert credential["awx.awx.credential"]["inputs"]["become_method"] == "sudo"
    [template] = tasks_of(play, "job_template")
    assert template["awx.awx.job_template"]["become_enabled"] is True
    assert template["awx.awx.job_template"]["credentials"] == ["{{ item.credential }}"]


def test_inventory_source_is_an_inventory_of_the_project(play):
    """The project is the layout of awx/project/ (tests/unit/awx/test_project.py checks it)."""
    path = play["vars"]["gpuvirt_awx_inventory_path"]
    assert os.path.isdir(os.path.join(REPO, "awx", "project", path)), "%s: no such inventory directory in the project" % path
    # the guests come from the collection's inventory plugin, the directory's last file
    last = sorted(name for name in os.listdir(os.path.join(REPO, "awx", "project", path)) if name.endswith(".yml"))[-1]
    assert last == "zz-tenants.gpuvirt_tenants.yml"
    [source] = tasks_of(play, "inventory_source")
    assert source["awx.awx.inventory_source"]["source_path"] == "{{ gpuvirt_awx_inventory_path }}"


def test_preflight_reports_go_to_the_job_artifacts_not_a_directory(play):
    """AWX throws away files the job writes; the preflight role hands its reports to set_stats
    (tests/unit/test_rollout_gate.py runs it), which AWX keeps as the job's artifacts."""
    [preflight] = [t for t in play["vars"]["gpuvirt_awx_templates"] if t["playbook"] == "preflight.yml"]
    assert "extra_vars" not in preflight and "gpuvirt_preflight_reports" in preflight["description"]


def test_no_placeholder_is_left(play):
    with open(PLAYBOOK, encoding="utf-8") as handle:
        text = handle.read()
    assert "example.invalid" not in text
    assert not {"gpuvirt_awx_scm_url", "gpuvirt_awx_ee_image", "gpuvirt_awx_ssh_user"} & set(play["vars"])
    check = play["tasks"][0]
    assert check["ansible.builtin.assert"]["that"][:4] == [
        "gpuvirt_awx_scm_url | default('') | length > 0", "gpuvirt_awx_ee_image | default('') | length > 0",
        "gpuvirt_awx_ssh_user | default('') | length > 0", "gpuvirt_awx_ssh_key_file | default('') | length > 0"]


def test_the_image_is_pulled_again_and_with_the_registry_credential(play):
    """A rebuilt tag reaches the next job (pull always, one of the module's choices), and a
    private registry gets a Container Registry credential that the execution environment uses."""
    spec = argument_spec("execution_environment")
    assert play["vars"]["gpuvirt_awx_ee_pull"] == "always" and "always" in spec["pull"]["choices"]
    [environment] = tasks_of(play, "execution_environment")
    assert environment["awx.awx.execution_environment"]["pull"] == "{{ gpuvirt_awx_ee_pull }}"
    assert "gpuvirt_awx_registry_credential" in environment["awx.awx.execution_environment"]["credential"]
    [registry] = [task for task in tasks_of(play, "credential")
                  if task["awx.awx.credential"]["credential_type"] == "Container Registry"]
    assert registry["awx.awx.credential"]["name"] == "{{ gpuvirt_awx_registry_credential }}" and registry["no_log"] is True
    assert set(registry["awx.awx.credential"]["inputs"]) == REGISTRY_INPUTS


def run_against_a_refused_controller(tmp_path, *extra):
    """awx/job_templates.yml with a controller address where nothing listens: every awx.awx call fails."""
    key = tmp_path / "key"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nKEYMATERIALNEVERSHOWN\n-----END OPENSSH PRIVATE KEY-----\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build", "collections"), ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               CONTROLLER_HOST="http://127.0.0.1:9", CONTROLLER_OAUTH_TOKEN="TOKENNEVERSHOWN", ANSIBLE_NOCOLOR="1")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), PLAYBOOK,
            "-e", "gpuvirt_awx_scm_url=https://git.example.com/fleet.git", "-e", "gpuvirt_awx_ee_image=registry.example.com/ee:1",
            "-e", "gpuvirt_awx_ssh_user=deploy", "-e", "gpuvirt_awx_ssh_key_file=%s" % key,
            "-e", "gpuvirt_awx_become_password=PASSWORDNEVERSHOWN"] + list(extra)
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, check=False, timeout=300)
    # blanks and line breaks as one space: the YAML callback folds long messages where the
    # ansible-core version decides (2.16 breaks after "credential NAME:")
    return proc.returncode, re.sub(r"\s+", " ", proc.stdout + proc.stderr)


def test_a_refused_credential_says_why_and_shows_no_secret(tmp_path):
    rc, out = run_against_a_refused_controller(tmp_path, "-e", "gpuvirt_awx_registry_username=puller",
                                               "-e", "gpuvirt_awx_registry_password=REGISTRYNEVERSHOWN")
    assert rc != 0
    for name in ("GPU hosts", "Tenant guests", "gpuvirt.tenancy registry"):
        assert re.search(r"credential %s: [^;]*Connection refused" % name, out), out[-3000:]
    for secret in ("KEYMATERIALNEVERSHOWN", "PASSWORDNEVERSHOWN", "REGISTRYNEVERSHOWN", "TOKENNEVERSHOWN"):
        assert secret not in out


def test_a_missing_key_file_is_named_before_any_credential(tmp_path):
    rc, out = run_against_a_refused_controller(tmp_path, "-e", "gpuvirt_awx_guest_ssh_key_file=%s" % (tmp_path / "nokey"))
    assert rc != 0
    assert "Tenant guests: the private key file %s is missing" % (tmp_path / "nokey") in out
    assert "TASK [AWX | Machine credentials" not in out
