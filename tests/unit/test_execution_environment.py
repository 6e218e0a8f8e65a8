# -*- coding: utf-8 -*-
"""execution-environment.yml: ansible-builder 3 accepts it and `ansible-builder create`
(scripts/ee_context.sh, no container engine) produces a build context holding the collection,
its Python requirements (pinned like requirements.txt) and its system requirements (bindep)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

builder = pytest.importorskip("ansible_builder", reason="ansible-builder is in requirements.txt; run scripts/bootstrap.sh")


def pins(path):
    result = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)$", line)
            if match:
                result[match.group(1).lower()] = match.group(2)
    return result


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    out = tmp_path_factory.mktemp("ee") / "context"
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "ee_context.sh"), str(out)],
                          capture_output=True, text=True, cwd=REPO, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Complete! The build context can be found at" in proc.stdout
    return out


def test_definition_is_a_valid_version_3_file():
    from ansible_builder.ee_schema import validate_schema  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        definition = yaml.safe_load(handle)
    validate_schema(definition)  # raises on a schema error
    assert definition["version"] == 3
    assert definition["dependencies"]["python"] == "meta/ee-requirements.txt"
    assert definition["dependencies"]["system"] == "bindep.txt"


def test_ee_pins_match_the_repository_pins():
    repo = pins(os.path.join(REPO, "requirements.txt"))
    ee = pins(os.path.join(REPO, "meta", "ee-requirements.txt"))
    assert ee and all(repo[name] == version for name, version in ee.items())
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        deps = yaml.safe_load(handle)["dependencies"]
    assert deps["ansible_core"]["package_pip"] == "ansible-core==" + repo["ansible-core"]
    assert deps["ansible_runner"]["package_pip"] == "ansible-runner==" + repo["ansible-runner"]


@pytest.mark.parametrize("profile, wanted", [
    ("dpkg", {"gcc", "pkg-config", "libvirt-dev", "python3-dev", "libvirt0"}),
    ("rpm", {"gcc", "pkgconf-pkg-config", "libvirt-devel", "python3.11-devel", "libvirt-libs"}),
])
def test_bindep_names_libvirt_headers_and_compiler(profile, wanted):
    from bindep.depends import Depends  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "bindep.txt"), encoding="utf-8") as handle:
        depends = Depends(handle.read())
    rules = depends.active_rules(["platform:%s" % profile, "compile", "default"])
    names = set(rule[0] for rule in rules)
    assert wanted <= names


def test_create_writes_the_build_context(context):
    containerfile = next(p for p in ("Containerfile", "Dockerfile") if (context / p).exists())
    text = (context / containerfile).read_text()
    repo = pins(os.path.join(REPO, "requirements.txt"))
    assert 'ANSIBLE_INSTALL_REFS="ansible-core==%s ansible-runner==%s"' % (repo["ansible-core"], repo["ansible-runner"]) in text
    assert "config-manager --set-enabled crb" in text
    assert "ansible-galaxy collection install" in text
    build = context / "_build"
    assert pins(build / "requirements.txt") == pins(os.path.join(REPO, "meta", "ee-requirements.txt"))
    assert "libvirt-devel [compile platform:rpm]" in (build / "bindep.txt").read_text()
    requirements = yaml.safe_load((build / "requirements.yml").read_text())
    assert requirements["collections"] == [{"name": "/build/collections/gpuvirt-tenancy.tar.gz", "type": "file"}]


def test_context_holds_the_collection_without_its_tests(context):
    with tarfile.open(context / "_build" / "collections" / "gpuvirt-tenancy.tar.gz") as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"]) == ("gpuvirt", "tenancy")
    for path in ("plugins/modules/preflight_info.py", "plugins/module_utils/preflight.py", "roles/preflight/tasks/main.yml",
                 "playbooks/site.yml", "playbooks/preflight.yml", "meta/execution-environment.yml", "bindep.txt"):
        assert path in names
    assert not [n for n in names if n.startswith(("tests/", "molecule/", "lab/"))]
