# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants stage's Fabric Manager partitions (``tenant_domain`` with ``tenants`` and
``fabric_manager``), on an HGX board with NVSwitches.

In the Shared NVSwitch virtualization model of NVIDIA's Fabric Manager user guide a tenant's GPUs
reach each other over NVLink only when the Fabric Manager has activated the partition holding
exactly them before the tenant starts, and the partition is deactivated once the tenant is gone
("GPU Partitions", "Activating a GPU Partition", "Deactivating a GPU Partition"). The plan names
each placed tenant's partition and each removed tenant's (``nvswitch_partition``,
placement/partitions.py); this decides, before anything changes, the steps the stage's call takes:
``fmpm -l`` read (fabric/partition_call.FabricManager, also in check mode), each starting tenant's
partition to activate, each removed tenant's to deactivate, checked by fabric/fmpm.decide (listed,
the plan's GPUs, no GPU another active partition holds unless a removal of the same call frees
it); then the steps are taken in the stage's order: a removed tenant's partition deactivated after
its removal, a tenant's partition activated between its definition and its start. A preview reads
no Fabric Manager (it runs no program): it shows the steps the plan asks for, unchecked."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric import fmpm
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.fabric.partition_call import FabricManager
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError

__metaclass__ = type

OPTION = "fabric_manager"
# How a partition that holds a starting tenant's GPUs is freed, in the stage's terms (fmpm.decide's ``free``).
FREE = ("deactivate it first: remove the tenant that holds its GPUs in the same run (state absent), or, where no tenant "
        "holds them, fmpm -d with its ID")
WHEN = {"activate": "between its definition and its start", "deactivate": "after its removal"}


def _known(name, partition, what):
    """An InputError where the plan does not know the partition's ID."""
    if partition.get("id") is None:
        raise InputError("tenant %s: %s (GPUs %s) has no known Fabric Manager partition (%s), and %s is set; give "
                         "policy.gpu_modules (each GPU's module ID) or leave %s out; nothing was changed"
                         % (name, what, ", ".join(partition["gpus"]), partition.get("why"), OPTION, OPTION))


def _partition(found, name):
    """The plan's Fabric Manager partition of placed tenant ``name`` (None without one)."""
    return found["placements"].get(name, {}).get("nvswitch_partition")


def _runs(conn, name):
    """Whether domain ``name`` exists and runs."""
    domain = conn.domain(name)
    return domain is not None and domain.is_active()


def _entry(name, partition, state):
    return {"id": partition["id"], "state": state, "physical_ids": list(partition["physical_ids"]),
            "label": "tenant %s" % name}


def wanted_partitions(found, placed, removals, conn):
    """-> (removals' partitions to be inactive, starting tenants' to be active, running tenants' [(name, ID)]),
    from the plan (``found``) and the stage's entries: a placed entry of state running whose domain does not
    run starts; one whose domain runs keeps what it has. Entries without a partition (no GPU, no NVSwitch) are
    left out; a partition the plan does not know is an InputError naming the tenant."""
    leaving, coming, running = [], [], []
    for entry in removals:
        partition = (found["released"].get(entry["name"]) or {}).get("nvswitch_partition")
        if partition:
            _known(entry["name"], partition, "its removal frees GPUs that")
            leaving.append(_entry(entry["name"], partition, "inactive"))
    for entry in placed:
        partition = _partition(found, entry["name"])
        if not partition or entry["state"] != "running":
            continue
        _known(entry["name"], partition, "its GPUs")
        if _runs(conn, entry["name"]):
            running.append((entry["name"], partition["id"]))
        else:
            coming.append(_entry(entry["name"], partition, "active"))
    return leaving, coming, running


def without_autostart(found, placed):
    """-> ``placed`` with libvirt's autostart off for each tenant with a partition. At the host's boot libvirt
    starts an autostarted domain before anything can activate its partition (the service VM's Fabric Manager is
    not up yet, and nothing of this collection runs then), and a tenant must not start before its partition is
    active (the guide's "Activating a GPU Partition": before the VM starts); so the tenants stage starts it, after
    activating its partition, when it runs after a boot. A tenant that asks ``autostart: true`` is refused,
    naming it, rather than dropped."""
    out = []
    for entry in placed:
        partition = _partition(found, entry["name"])
        if partition and entry.get("state") != "absent":
            if entry.get("autostart"):
                raise InputError("tenant %s: autostart true would start it at the host's boot before the Fabric Manager "
                                 "activates its partition %s; leave autostart out (the tenants stage starts it after "
                                 "activating the partition), or leave %s out; nothing was changed"
                                 % (entry["name"], partition.get("id"), OPTION))
            entry = dict(entry, autostart=False)
        out.append(entry)
    return out


def held_for_service_vm(service_vm, found, placed, conn, run):
    """-> (``placed`` with the tenants to hold, their names). Where the call defines or starts the Fabric Manager's
    service VM (``fabric_vm``: ``service_vm``, tenancy.fabric_vm's answer), no Fabric Manager answers the call yet
    (the VM boots after the call starts it), so no partition can be read or activated: each tenant that would start
    with a partition is defined and not started (state ``defined``, no autostart) and said in a warning; the next
    run, with the service VM running, activates their partitions and starts them. Nothing is held when there is no
    service VM in the call, or it runs already (the Fabric Manager is then read before any change, as always)."""
    if service_vm is None:
        return placed, []
    if _runs(conn, service_vm["name"]):
        return placed, []
    out, held = [], []
    for entry in placed:
        if _partition(found, entry["name"]) and entry["state"] == "running" and not _runs(conn, entry["name"]):
            # its autostart is already off (without_autostart)
            entry = dict(entry, state="defined")
            held.append(entry["name"])
        out.append(entry)
    if held:
        run.warn("the Fabric Manager's service VM %s does not run before this call, so no Fabric Manager can activate a "
                 "partition now: tenant(s) %s are defined and not started; run the stage again once the Fabric Manager "
                 "answers at %s, and it activates their partitions and starts them"
                 % (service_vm["name"], ", ".join(held), service_vm["address"]))
    return out, held


class TenantFabric:
    """The partition steps of one call of the stage, decided when made (see the module docstring), taken by
    :meth:`attach` (activation: a tenant's domain change calls it before it starts the domain) and
    :meth:`after` (deactivation, after a removal)."""

    def __init__(self, options, found, placed, removals, conn, host, run, preview):
        leaving, coming, running = wanted_partitions(found, placed, removals, conn)
        self.manager = None
        self.listed = None
        self.steps = []  # [{tenant, id, physical_ids, step, done}] in the order they are taken
        self.done = []   # what the call did, in order, for an error's message
        self._by_step = {}
        self._noted = set()  # tenants whose definition is already in ``done``
        if not (leaving or coming or running):
            return
        if preview:
            # a preview runs no program: the steps the plan asks for, the Fabric Manager's list not read
            out = [("deactivate", e["id"]) for e in leaving] + [("activate", e["id"]) for e in coming]
            before, after = "(a preview reads no Fabric Manager)\n", ""
        else:
            self.manager = FabricManager(host, options, OPTION + ".")
            self.listed = self.manager.listing()
            # removals first: a partition they free may be a starting tenant's, or hold its GPUs
            freed = fmpm.decide(self.listed, leaving, FREE)
            out = freed + fmpm.decide(fmpm.after(self.listed, freed), coming, FREE)
            before = fmpm.render_active(self.listed)
            after = fmpm.render_active(fmpm.after(self.listed, out))
            for name, number in running:
                partition = self.listed.get(number)
                if not (partition and partition["active"]):
                    run.warn("tenant %s runs while its Fabric Manager partition %d is %s: its GPUs have no NVLink between "
                             "them; the stage activates a partition only before it starts a tenant (never under a running "
                             "guest): shut the tenant down and run the stage again"
                             % (name, number, "not active" if partition else "not in the Fabric Manager's list"))
        source = {"deactivate": dict((e["id"], e) for e in leaving), "activate": dict((e["id"], e) for e in coming)}
        for action, number in out:
            entry = source[action][number]
            step = {"tenant": entry["label"][len("tenant "):], "id": number, "physical_ids": entry["physical_ids"],
                    "step": action, "done": False}
            self.steps.append(step)
            self._by_step[(step["tenant"], action)] = step
        lines = "".join("tenant %s: partition %d (physical IDs %s) %sd %s\n" % (
            s["tenant"], s["id"], ", ".join(map(str, s["physical_ids"])), s["step"], WHEN[s["step"]]) for s in self.steps)
        if self.steps:
            run.diff.add("fabric partitions (active)", before, after + lines)

    @property
    def changed(self):
        return bool(self.steps)

    def attach(self, change):
        """Before ``change`` (a tenant's TenantDomain) starts its domain: its partition activated."""
        step = self._by_step.get((change.spec.name, "activate"))
        if step is not None and change.start:
            change.before_start = lambda run: self._before_start(change, step, run)

    def _before_start(self, change, step, run):
        if change.define and not run.check_mode:
            self.done.append("tenant %s defined" % step["tenant"])
            self._noted.add(step["tenant"])
        self._take(step, run, "%s is defined, not started" % step["tenant"])

    def after(self, change, run):
        """After ``change`` (a tenant's TenantDomain) acted: a removed tenant's partition deactivated; what it did noted."""
        name = change.spec.name
        did = [word for word, flag in (("removed", change.remove), ("defined", change.define and name not in self._noted),
                                       ("started", change.start)) if flag]
        if did and not run.check_mode:
            self.done.append("tenant %s %s" % (name, " and ".join(did)))
        step = self._by_step.get((name, "deactivate"))
        if step is not None and change.remove:
            self._take(step, run, "%s is removed, its partition left active" % name)

    def _take(self, step, run, state):
        if run.check_mode:
            return
        try:
            self.manager.step(step["step"], step["id"])
        except StateError as exc:
            error = StateError("tenant %s: %s; %s; done before it: %s" % (
                step["tenant"], exc, state, "; ".join(self.done) or "nothing"))
            error.details = dict(getattr(exc, "details", None) or {}, fabric_partitions=self.steps)
            raise error
        step["done"] = True
        run.changed = True
        self.done.append("partition %d %sd (tenant %s)" % (step["id"], step["step"], step["tenant"]))

    def result(self):
        return {"read": self.listed is not None, "steps": self.steps}
