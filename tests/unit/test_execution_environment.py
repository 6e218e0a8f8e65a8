# -*- coding: utf-8 -*-
"""The built collection and its execution environment.

- The artifact (`ansible-galaxy collection build`, as scripts/ee_context.sh makes it): galaxy.yml's
  build_ignore leaves the tests, lab, Molecule, benchmarks and scripts out; it installs into an
  empty collections path without a warning, `ansible-doc -l` lists every module there, and
  yamllint passes in the installed tree.
- meta/runtime.yml's action groups hold the modules that share their options (module_defaults).
- execution-environment.yml: ansible-builder 3 accepts it and `ansible-builder create` (no
  container engine), from the installed collection alone, produces a build context with the collection and what runs on the controller
  only: an SSH client and, for the preview, libvirt-python with libvirt's client library; libvirt's
  headers, pkg-config and the compiler only in the compile profile (the builder stage), for this EE
  or any EE that includes the collection (`ansible-builder introspect` of the installed collection)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile

import pytest
import yaml

import built_collection  # pylint: disable=import-error

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
def artifact():
    """The collection tarball a release holds (tests/unit/built_collection.py)."""
    return built_collection.artifact()


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    out = tmp_path_factory.mktemp("ee") / "context"
    proc = subprocess.run(["bash", os.path.join(REPO, "scripts", "ee_context.sh"), str(out)],
                          capture_output=True, text=True, cwd=REPO, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Complete! The build context can be found at" in proc.stdout
    return out


# Paths of the repository that must never reach the artifact (lab, tests and their tooling).
LEFT_OUT = ("tests/", "molecule/", "lab/", "benchmarks/", "scripts/", "inventories/lab/", "playbooks/lab/",
            ".ci/", ".build/", ".venv/", "docs/lab.md", "docs/benchmarks.md", "requirements.txt", "ansible.cfg")
SHIPPED_TEST_FILES = ("tests/config.yml",)
# What only builds libvirt-python (the builder stage, bindep's compile profile), never the image that runs jobs.
BUILD_ONLY = ("libvirt-dev", "libvirt-devel", "gcc", "pkg-config", "pkgconf", "python3-dev", "python3.11-devel")


def module_names():
    return sorted(name[:-3] for name in os.listdir(os.path.join(REPO, "plugins", "modules")) if name.endswith(".py"))


def test_definition_is_a_valid_version_3_file():
    from ansible_builder.ee_schema import validate_schema  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        definition = yaml.safe_load(handle)
    validate_schema(definition)  # raises on a schema error
    assert definition["version"] == 3
    assert "python" not in definition["dependencies"]
    assert definition["dependencies"]["system"] == "bindep.txt"
    with open(os.path.join(REPO, "meta", "execution-environment.yml"), encoding="utf-8") as handle:
        assert yaml.safe_load(handle)["dependencies"] == {"system": "bindep.txt", "python": "meta/ee-requirements.txt"}
    assert pip_requirements(os.path.join(REPO, "meta", "ee-requirements.txt")) == ["libvirt-python>=9.0.0"]


def pip_requirements(path):
    with open(path, encoding="utf-8") as handle:
        return [line.split("#", 1)[0].strip() for line in handle if line.split("#", 1)[0].strip()]


def test_ee_pins_match_the_repository_pins():
    repo = pins(os.path.join(REPO, "requirements.txt"))
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        deps = yaml.safe_load(handle)["dependencies"]
    assert deps["ansible_core"]["package_pip"] == "ansible-core==" + repo["ansible-core"]
    assert deps["ansible_runner"]["package_pip"] == "ansible-runner==" + repo["ansible-runner"]


@pytest.mark.parametrize("profile, run, build", [
    ("dpkg", {"openssh-client", "libvirt0"}, {"libvirt-dev", "pkg-config", "gcc", "python3-dev"}),
    ("rpm", {"openssh-clients", "libvirt-libs"}, {"libvirt-devel", "pkgconf-pkg-config", "gcc", "python3.11-devel"})])
def test_bindep_holds_only_what_the_controller_runs(profile, run, build):
    """At run time an SSH client and libvirt's client library (the preview's libvirt-python); its
    build chain only in the compile profile."""
    from bindep.depends import Depends  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "bindep.txt"), encoding="utf-8") as handle:
        depends = Depends(handle.read())
    running = set(rule[0] for rule in depends.active_rules(["platform:%s" % profile, "default"]))
    assert running == run
    assert set(rule[0] for rule in depends.active_rules(["platform:%s" % profile, "compile", "test", "default"])) == run | build


def test_create_writes_the_build_context(context):
    containerfile = next(p for p in ("Containerfile", "Dockerfile") if (context / p).exists())
    text = (context / containerfile).read_text()
    repo = pins(os.path.join(REPO, "requirements.txt"))
    assert 'ANSIBLE_INSTALL_REFS="ansible-core==%s ansible-runner==%s"' % (repo["ansible-core"], repo["ansible-runner"]) in text
    # CRB (libvirt-devel) is enabled in the builder stage only, where pip builds libvirt-python
    builder = text.split("FROM base AS builder", 1)[1].split("FROM base AS final", 1)[0]
    assert "config-manager --set-enabled crb" in builder and text.count("crb") == 1 and "libvirt" not in text
    assert "ansible-galaxy collection install" in text
    build = context / "_build"
    assert not (build / "requirements.txt").exists()
    rules = [line for line in (build / "bindep.txt").read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert rules and [line for line in rules if any(word in line for word in BUILD_ONLY) and "compile]" not in line] == []
    requirements = yaml.safe_load((build / "requirements.yml").read_text())
    assert requirements["collections"] == [{"name": "/build/collections/ansible_collections/gpuvirt/tenancy", "type": "dir"}]
    # The Containerfile copies _build to /build, where that requirement finds the installed collection.
    assert "COPY _build /build" in text
    manifest = json.loads((build / "collections" / "ansible_collections" / "gpuvirt" / "tenancy" / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["name"] == "tenancy"


def test_artifact_holds_the_collection_without_its_tests_or_lab(artifact):
    with tarfile.open(artifact) as tar:
        names = [n for n in tar.getnames() if tar.getmember(n).isfile()]
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    info = manifest["collection_info"]
    assert (info["namespace"], info["name"]) == ("gpuvirt", "tenancy")
    assert info["license"] == ["GPL-3.0-or-later"] and "example" not in json.dumps(info)
    for path in ("LICENSE", "README.md", "changelogs/changelog.yaml", "meta/runtime.yml", "meta/execution-environment.yml",
                 "bindep.txt", "execution-environment.yml", "awx/job_templates.yml", "docs/docsite/extra-docs.yml",
                 "plugins/modules/preflight_info.py", "plugins/module_utils/preflight/checks.py", "roles/preflight/tasks/main.yml",
                 "playbooks/site.yml", "playbooks/preflight.yml", ".yamllint", "tests/config.yml"):
        assert path in names
    assert ["plugins/modules/%s.py" % name for name in module_names()] == sorted(n for n in names if n.startswith("plugins/modules/"))
    # Of tests/, only ansible-test's configuration ships.
    assert [n for n in names if n.startswith(LEFT_OUT) and n not in SHIPPED_TEST_FILES or "__pycache__" in n or n.endswith(".pyc")] == []


clean_env = built_collection.clean_env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The artifact installed into an empty collections path, as a user installs it: no warning."""
    path = tmp_path_factory.mktemp("collections")
    proc = built_collection.install(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpuvirt.tenancy:%s was installed successfully" % galaxy()["version"] in proc.stdout
    assert "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return path


def test_installed_artifact_lists_every_module(installed):
    env = clean_env(installed)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-l", "gpuvirt.tenancy", "--json"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(proc.stdout)) == ["gpuvirt.tenancy.%s" % name for name in module_names()]


def test_ee_context_from_the_installed_collection_alone(installed, tmp_path):
    """A user with the installed collection and no checkout: ansible-builder create from the
    installed execution-environment.yml, run elsewhere, writes a context holding the collection;
    the image's galaxy step (ansible-galaxy collection install -r requirements.yml) installs it."""
    tree = installed / "ansible_collections" / "gpuvirt" / "tenancy"
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bindir, "ansible-builder"), "create", "-f", str(tree / "execution-environment.yml"),
                           "-c", str(tmp_path / "context")], cwd=str(tmp_path), capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No matches" not in proc.stdout + proc.stderr and "does not exist" not in proc.stdout + proc.stderr
    build = tmp_path / "context" / "_build"
    # The galaxy stage of the image, with /build being this context's _build.
    requirements = (build / "requirements.yml").read_text().replace("/build/", str(build) + "/")
    (tmp_path / "requirements.yml").write_text(requirements)
    image = tmp_path / "image-collections"
    env = clean_env(image)
    image.mkdir()
    (image / "ansible.cfg").write_text("[defaults]\n")
    proc = subprocess.run([os.path.join(bindir, "ansible-galaxy"), "collection", "install", "-r", str(tmp_path / "requirements.yml"),
                           "-p", str(image)], capture_output=True, text=True, env=env, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([os.path.join(bindir, "ansible-doc"), "-l", "gpuvirt.tenancy", "--json"],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(proc.stdout)) == ["gpuvirt.tenancy.%s" % name for name in module_names()]


def test_yamllint_passes_in_the_installed_tree(installed):
    """The shipped .yamllint holds the rules (and leaves out antsibull-changelog's changelog.yaml),
    so yamllint run where the collection is installed passes."""
    tree = installed / "ansible_collections" / "gpuvirt" / "tenancy"
    proc = subprocess.run([sys.executable, "-m", "yamllint", "-s", "."], cwd=str(tree),
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr


def test_installed_collection_gives_an_ee_the_previews_libvirt_python_and_builds_it_apart(installed):
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-builder"), "introspect", str(installed)],
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = yaml.safe_load(proc.stdout)
    python, system = found["python"], found["system"]
    assert [line.split("#", 1)[0].strip() for line in python] == ["libvirt-python>=9.0.0"]
    assert system and [line for line in system if any(word in line for word in BUILD_ONLY) and "compile]" not in line] == []
    assert [line for line in system if line.startswith("libvirt-devel ")] == ["libvirt-devel [platform:rpm compile]  # from collection gpuvirt.tenancy"]


def runtime():
    with open(os.path.join(REPO, "meta", "runtime.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def galaxy():
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def module_options(names):
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "--json"]
                          + ["gpuvirt.tenancy." + name for name in names],
                          capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return dict((key.split(".")[-1], set(doc["doc"].get("options") or {})) for key, doc in json.loads(proc.stdout).items())


def action_plugin_names():
    return sorted(name[:-3] for name in os.listdir(os.path.join(REPO, "plugins", "action")) if name.endswith(".py"))


def test_action_groups_for_module_defaults():
    """group/gpuvirt.tenancy.all holds every module that takes root, which is every module but the
    action plugins (host_reboot: ansible.builtin.reboot's options and its own; gate_check, stage_options,
    stage_result, preflight_report, reboot_share, report_file, guest_inventory, mig_layout, mps_plan and the rdma_*
    ones: on the controller, they ask the host nothing; stage_call runs a stage's module, and libvirt_service
    tenant_domain_info, each of which gets the play's module_defaults for that module; preflight_info's action plugin
    runs a module that takes root) and
    fabric_partition (it reads and writes no file, only the Fabric Manager's partitions through fmpm); group
    gpuvirt.tenancy.libvirt holds exactly the modules with a libvirt uri (a module refuses a
    default for an option it does not have, so a group holds only modules sharing its options)."""
    groups = runtime()["action_groups"]
    options = module_options(module_names())
    assert sorted(groups["all"]) == [name for name in module_names() if "root" in options[name]]
    assert [name for name in module_names() if "root" not in options[name]] == [
        "fabric_partition", "gate_check", "guest_inventory", "host_reboot", "libvirt_service", "mig_layout", "mps_plan",
        "preflight_report", "rdma_calls", "rdma_fleet", "rdma_netdev", "rdma_verbs", "reboot_share", "report_file",
        "stage_call", "stage_options", "stage_result"]
    # preflight_info's action runs the module itself on a captured tree, and ships it elsewhere
    assert action_plugin_names() == ["gate_check", "guest_inventory", "host_reboot", "libvirt_service", "mig_layout", "mps_plan",
                                     "preflight_info", "preflight_report", "rdma_calls", "rdma_fleet", "rdma_netdev",
                                     "rdma_verbs", "reboot_share", "report_file", "stage_call", "stage_options",
                                     "stage_result"]
    assert sorted(groups["libvirt"]) == [name for name in module_names() if "uri" in options[name]]


def test_requires_ansible_is_the_oldest_tested_line_and_no_upper_bound():
    """scripts/test.sh tests the oldest (stage oldest), the pinned and the newest (stage newest)
    ansible-core; the claim starts at the oldest line and has no upper bound (Ansible's collection
    requirements: a cap refuses the next ansible-core on its release day)."""
    versions = [pins(os.path.join(REPO, name))["ansible-core"]
                for name in ("requirements-oldest.txt", "requirements.txt", "requirements-newest.txt")]
    lines = [tuple(int(part) for part in version.split(".")[:2]) for version in versions]
    assert lines == sorted(lines) and len(set(lines)) == 3
    assert runtime()["requires_ansible"] == ">=%d.%d.0" % lines[0]


def test_a_removed_plugin_fails_with_what_replaced_it(installed):
    """meta/runtime.yml's tombstone: a play of the installed collection that still names the removed
    filter stage_check_result fails naming the action that replaced it, not with "not found"."""
    routing = runtime()["plugin_routing"]["filter"]["stage_check_result"]["tombstone"]
    assert routing["removal_version"] == galaxy()["version"]
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "ansible.builtin.debug",
                           "-a", "msg={{ 1 | gpuvirt.tenancy.stage_check_result }}"],
                          capture_output=True, text=True, env=clean_env(installed), check=False, timeout=120)
    assert proc.returncode != 0
    said = " ".join(proc.stdout.replace("'", " ").split())
    # ansible-core 2.16 says "was removed from gpuvirt.tenancy in version 0.2.0", later cores "has been removed"
    assert "gpuvirt.tenancy.stage_check_result" in said and ("has been removed" in said or "was removed from gpuvirt.tenancy" in said), said
    assert "Use the action gpuvirt.tenancy.gate_check instead" in said, said


# What README.md's requirements claim for the GPU hosts and the tenant guests: Debian 12 (the lab),
# Ubuntu 22.04 and the RHEL family 8 and 9 (their paths unit-tested and previewed from captures).
PLATFORMS = [{"name": "Debian", "versions": ["bookworm"]}, {"name": "Ubuntu", "versions": ["jammy"]},
             {"name": "EL", "versions": ["8", "9"]}]


def test_roles_claim_the_oldest_tested_version_and_the_claimed_platforms():
    oldest = pins(os.path.join(REPO, "requirements-oldest.txt"))["ansible-core"].rsplit(".", 1)[0]
    for role in sorted(os.listdir(os.path.join(REPO, "roles"))):
        with open(os.path.join(REPO, "roles", role, "meta", "main.yml"), encoding="utf-8") as handle:
            info = yaml.safe_load(handle)["galaxy_info"]
        assert info["min_ansible_version"] == oldest, role
        assert info["platforms"] == PLATFORMS, role
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        readme = " ".join(handle.read().split())
    assert "Debian 12 (bookworm), Ubuntu 22.04 (jammy), and the RHEL family 8 and 9 (EL 8, EL 9)" in readme
