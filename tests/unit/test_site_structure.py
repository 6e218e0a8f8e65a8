# -*- coding: utf-8 -*-
"""playbooks/site.yml: one rolling play (serial, max_fail_percentage, preflight gate first) imports
the host stages' task files that the stage playbooks import too (one wiring of each stage), a
play on the controller fails the run while hosts wait for their reboot, and the guest stage
playbooks are imported with their tags."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import stage_module

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOST_STAGES = ("boot.yml", "sriov_vfio.yml", "tenants.yml")


def load(name):
    with open(os.path.join(REPO, "playbooks", name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def rolling_play():
    return next(p for p in load("site.yml") if "serial" in p)


def imports_of(tasks):
    """(role:entry point, tags) of the import_role tasks of the host stages in a task list."""
    return [("%s:%s" % (t["ansible.builtin.import_role"]["name"], t["ansible.builtin.import_role"].get("tasks_from")),
             t.get("tags") or []) for t in tasks
            if t.get("ansible.builtin.import_role", {}).get("name") == "gpuvirt.tenancy.host_stages"]


def test_each_host_stage_is_wired_once():
    """The rolling play and the stage playbooks import the same stage files: one wiring."""
    rolling = rolling_play()
    assert imports_of(rolling["tasks"]) == [("gpuvirt.tenancy.host_stages:%s" % name[:-4], [name[:-4]]) for name in HOST_STAGES]
    for name in HOST_STAGES:
        plays = load(name)
        assert plays[0]["hosts"] == "gpuvirt_hosts"
        assert imports_of(plays[0]["tasks"]) == [("gpuvirt.tenancy.host_stages:%s" % name[:-4], [])]
        # after the tenants stage only: the play that waits for the guests it added (test below)
        assert [p["hosts"] for p in plays[1:]] == (["gpuvirt_guests"] if name == "tenants.yml" else [])
        assert os.path.isfile(os.path.join(REPO, "roles", "host_stages", "tasks", name))
    assert not os.path.exists(os.path.join(REPO, "playbooks", "stages"))


def _guests_ready_plays(name):
    return [p for p in load(name) if p.get("hosts") == "gpuvirt_guests"
            and any(t.get("ansible.builtin.import_role", {}).get("tasks_from") == "ready" for t in p.get("tasks") or [])]


def test_the_guests_the_tenants_stage_added_are_waited_for_one_way():
    """tenants.yml and site.yml wait for the guests' login and cloud-init with the same task, after the
    tenants stage and before the guest stages (site.yml)."""
    tasks = {}
    for name in ("tenants.yml", "site.yml"):
        plays = _guests_ready_plays(name)
        assert len(plays) == 1, name
        task = dict(plays[0]["tasks"][0])
        task.pop("name")
        tasks[name] = task
    assert tasks["tenants.yml"] == tasks["site.yml"]
    assert tasks["site.yml"]["ansible.builtin.import_role"]["name"] == "gpuvirt.tenancy.tenant_guests"
    plays = load("site.yml")
    ready = plays.index(_guests_ready_plays("site.yml")[0])
    assert plays.index(rolling_play()) < ready < min(i for i, p in enumerate(plays) if "import_playbook" in str(p))


def test_rolling_play_keywords_and_gate():
    rolling = rolling_play()
    assert rolling["serial"] == "{{ gpuvirt_serial | default(1) }}"
    assert rolling["max_fail_percentage"] == "{{ gpuvirt_max_fail_percentage | default(0) }}"
    names = [t["name"] for t in rolling["tasks"]]
    gate = names.index("Fleet | Stop the rollout at this batch when a host fails preflight")
    first_stage = min(i for i, t in enumerate(rolling["tasks"]) if "boot" in (t.get("tags") or []))
    assert gate < first_stage
    assert set(rolling["tasks"][gate]["tags"]) == {"preflight", "always"}


def test_a_host_deferred_by_the_reboot_budget_fails_the_run():
    """After the rolling play, a play on the controller fails while any host waits for its reboot."""
    plays = load("site.yml")
    deferred = plays[plays.index(rolling_play()) + 1]
    assert deferred["hosts"] == "localhost"
    task = deferred["tasks"][0]
    assert "ansible.builtin.fail" in task and "deferred_hosts" in task["vars"]["__fleet_deferred"]
    tasks_dir = os.path.join(REPO, "roles", "host_stages", "tasks")
    with open(os.path.join(tasks_dir, "boot.yml"), encoding="utf-8") as handle:
        boot = yaml.safe_load(handle)
    # the budget's tasks, included by the boot stage only in a real run with a reboot due (boot_reboot.yml then
    # shares the budget where one applies, or stops the host whose reboot is pending)
    include = next(t for t in boot if "boot_reboot.yml" in str(t.get("ansible.builtin.include_tasks")))
    assert "not ansible_check_mode" in include["when"] and "host_boot_reboot_required | default(false) | bool" in include["when"]
    with open(os.path.join(tasks_dir, "boot_reboot.yml"), encoding="utf-8") as handle:
        after_call = yaml.safe_load(handle)
    include = next(t for t in after_call if "boot_budget.yml" in str(t.get("ansible.builtin.include_tasks")))
    assert "gpuvirt_reboot_budget is defined" in include["when"]
    with open(os.path.join(tasks_dir, "boot_budget.yml"), encoding="utf-8") as handle:
        budget = yaml.safe_load(handle)
    assert budget[0]["gpuvirt.tenancy.reboot_share"] == {"budget": "{{ gpuvirt_reboot_budget }}"}
    # the deferred host's tasks, included by the budget's tasks only for a host over the budget
    include = next(t for t in budget if t["name"] == "Boot | Defer a host over the budget to the next run")
    assert "not __host_stages_boot_budget.reboot_now" in include["when"]
    with open(os.path.join(tasks_dir, include["ansible.builtin.include_tasks"]["file"]), encoding="utf-8") as handle:
        deferred = yaml.safe_load(handle)
    assert {"ansible.builtin.set_fact": {"gpuvirt_reboot_deferred": True}}.items() <= deferred[0].items()
    assert deferred[-1]["ansible.builtin.meta"] == "end_host"


def test_site_imports_the_guest_stage_playbooks_with_their_tags():
    imports = [(p["ansible.builtin.import_playbook"], p["tags"]) for p in load("site.yml") if "ansible.builtin.import_playbook" in p]
    assert imports == [("rdma.yml", ["rdma"]), ("gpu_sharing.yml", ["gpu_sharing"])]


def test_a_preview_that_matches_no_host_fails_before_the_rolling_play():
    plays = load("site.yml")
    first = plays[0]
    assert first["hosts"] == "localhost" and plays.index(rolling_play()) == 1
    task = first["tasks"][0]
    assert "ansible.builtin.fail" in task
    assert "query('ansible.builtin.inventory_hostnames', __preview_hosts) | length == 0" in task["when"]
    # the pattern asked is the one the rolling play takes its hosts from
    assert task["vars"]["__preview_hosts"] == rolling_play()["hosts"]


@pytest.mark.parametrize("name", sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "playbooks", "*.yml"))))
def test_plays_on_hosts_and_guests_become_root(name):
    """A non-root SSH user works: every play that runs on the GPU hosts or the tenant guests
    becomes root; plays on the controller (localhost) and playbook imports do not."""
    for play in load(name):
        hosts = play.get("hosts")
        if hosts is None or "localhost" in hosts:
            assert "become" not in play, "%s: %s" % (name, play.get("name"))
        else:
            assert play.get("become") is True, "%s: %s needs become: true" % (name, play.get("name"))


# What async_status reads in a job's result file: a module result holding one of these keys is taken
# for a job still running (``started``) or misread, so a task that runs such a module async polls
# until its bound (tenant_domain's ``started``, the domains it started, did so in the lab: it is
# ``powered_on`` now).
ASYNC_STATUS_KEYS = {"started", "finished", "ansible_job_id", "results_file"}


def tasks_in(node):
    if isinstance(node, list):
        for item in node:
            yield from tasks_in(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from tasks_in(node.get(key))


def module_returns(fqcn):
    """The top-level keys the collection's module documents in RETURN."""
    name = fqcn.split(".")[-1]
    with open(os.path.join(REPO, "plugins", "modules", name + ".py"), encoding="utf-8") as handle:
        source = handle.read()
    start = source.index('RETURN = r"""') + len('RETURN = r"""')
    return set(yaml.safe_load(source[start:source.index('"""', start)]) or {})


def test_modules_run_async_return_no_key_async_status_reads():
    found = []
    for path in sorted(glob.glob(os.path.join(REPO, "roles", "*", "tasks", "*.yml")) + glob.glob(os.path.join(REPO, "playbooks", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            for task in tasks_in(yaml.safe_load(handle)):
                module = next((key for key in task if key.startswith("gpuvirt.tenancy.")), None)
                if module == "gpuvirt.tenancy.stage_call":
                    # the action runs the stage's module, whose result is the task's
                    module = stage_module(task[module]["stage"])
                if module and "async" in task:
                    found.append(module)
                    clash = module_returns(module) & ASYNC_STATUS_KEYS
                    assert not clash, "%s: %s runs async but returns %s, which async_status reads" % (path, module, sorted(clash))
    assert {"gpuvirt.tenancy.iommu_grub", "gpuvirt.tenancy.tenant_domain"} <= set(found), found
