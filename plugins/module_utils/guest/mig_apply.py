# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mig_profile module: read every GPU through nvidia-smi, plan each against the layout
(:mod:`mig`, pure), and apply GPU by GPU. Nothing changes until every GPU's plan is valid."""

from __future__ import absolute_import, division, print_function

import traceback
from collections import Counter

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import program_path
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError, undecodable
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.mig import (
    describe_plan, desired_per_gpu, normalize_entry, plan, plan_gpu, predicted_after, public_instances,
    select_mig_parted_config, state_view)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nvidia_smi import NvidiaSmi, NvidiaSmiError

try:
    import yaml
    HAS_YAML = True
    YAML_ERROR = None
except ImportError:
    HAS_YAML = False
    YAML_ERROR = traceback.format_exc()

__metaclass__ = type


def mig_profile(params, host, run):
    """The mig_profile module's result fields."""
    entries = load_entries(params, host)
    smi = NvidiaSmi(nvidia_smi_path(params, host), host)
    try:
        gpus = read_gpus(smi)
        if gpus:
            wanted, warnings = desired_per_gpu(entries, gpus, "error" if params["layout"] is not None else "warn")
            for warning in warnings:
                run.warn(warning)
            plans, errors, blocked = plan(wanted, gpus, params["reset"])
    except (InputError, StateError) as exc:
        raise _failure(InputError if isinstance(exc, InputError) else StateError, "%s; nothing was changed" % exc, smi)
    if not gpus:
        raise _failure(StateError, "nvidia-smi lists no GPU on this host; nothing was changed", smi)
    if errors:
        raise _failure(InputError, "the layout cannot be applied; nothing was changed: " + "; ".join(errors), smi)
    if blocked and not params["force"]:
        raise _failure(InputError, "refusing to destroy GPU instances in use (set force: true to destroy them anyway); "
                                   "nothing was changed: " + "; ".join(blocked), smi)
    applier = GpuApplier(smi, params["reset"], run)
    results, all_actions, before, after = [], [], {}, {}
    changed = False
    for gpu in gpus:
        entry, gpu_plan = wanted.get(gpu["index"]), plans.get(gpu["index"])
        result = gpu_result(gpu, entry, gpu_plan, applier, results, all_actions)
        all_actions.extend(result["actions"])
        key = "gpu%d %s" % (gpu["index"], gpu["bus_id"])
        before[key] = state_view(gpu)
        after[key] = {"mig_mode": result["mig_mode_after"], "instances": result["instances_after"]}
        if gpu_plan:
            # Honest: a mode change that was already pending changes nothing by itself; a
            # reset that made it current does.
            changed = changed or bool(gpu_plan["destroy"] or gpu_plan["create"] or result["reset_performed"]
                                      or (gpu_plan["mode"] and not (gpu_plan.get("mode_already_pending")
                                                                    and gpu_plan.get("reset_needed", True)))
                                      or (run.check_mode and gpu_plan["mode"] and not result["reboot_required"]))
        results.append(result)
    run.diff.extend([{"before": before, "after": after}])
    return {"changed": changed, "gpus": results, "plan": all_actions,
            "reboot_required": any(r["reboot_required"] for r in results), "commands": smi.commands}


def gpu_result(gpu, entry, gpu_plan, applier, results, all_actions):
    """One GPU: its plan applied (or, in check mode, predicted) and what it has after."""
    index = gpu["index"]
    actions = describe_plan(gpu, gpu_plan) if gpu_plan else []
    result = {
        "index": index, "bus_id": gpu["bus_id"], "name": gpu["name"], "device_id": gpu["device_id"],
        "managed": entry is not None, "mig_capable": gpu["mig_capable"], "mig_mode": dict(gpu["mig_mode"]),
        "instances_before": public_instances(gpu), "actions": actions,
        "reset_performed": False, "reboot_required": bool(gpu_plan and gpu_plan.get("pending_reboot")),
    }
    if not actions:
        result["mig_mode_after"] = dict(gpu["mig_mode"])
        result["instances_after"] = sorted(gi["profile"] for gi in result["instances_before"])
    elif applier.run.check_mode:
        predict(gpu, entry, gpu_plan, applier.reset_policy, result)
    else:
        smi = applier.smi
        details = {"changed": True, "gpus": results, "plan": all_actions, "commands": smi.commands}
        try:
            reset_done, reboot, messages = applier.apply(gpu, entry, gpu_plan)
        except (InputError, StateError) as exc:
            raise _failure(StateError, "GPU %d: %s" % (index, exc), smi, details)
        for message in messages:
            applier.run.warn(message)
        result["reset_performed"], result["reboot_required"] = reset_done, reboot
        result["actions"] = describe_plan(gpu, gpu_plan)
        now = [g for g in smi.gpus() if g["index"] == index][0]
        result["mig_mode_after"] = now["mig_mode"]
        now_instances = smi.instances(index) if now["mig_mode"]["current"] == "enabled" else []
        result["instances_after"] = sorted(gi["profile"] for gi in now_instances)
        if not reboot and entry["mig_enabled"]:
            wanted_list = sorted(Counter(entry["mig_devices"]).elements())
            if result["instances_after"] != wanted_list:
                details["gpus"] = results + [result]
                raise _failure(StateError, "GPU %d: after applying, nvidia-smi lists %s instead of %s"
                               % (index, result["instances_after"], wanted_list), smi, details)
    return result


def predict(gpu, entry, gpu_plan, reset_policy, result):
    """Check mode: the mode and instances the GPU will have."""
    target = "enabled" if entry["mig_enabled"] else "disabled"
    # A change already pending stays pending without a reset (or while the GPU is busy);
    # whether a new change goes pending is known only when it is made.
    # A Hopper GPU takes the change without a reset (mig.mode_switch_without_reset): never a reboot.
    stays_pending = (bool(gpu_plan.get("mode_already_pending")) and gpu_plan.get("reset_needed", True)
                     and (reset_policy == "never" or bool(gpu["processes"])))
    result["mig_mode_after"] = {"current": gpu["mig_mode"]["current"] if stays_pending else target, "pending": target}
    result["instances_after"] = predicted_after(entry, gpu_plan)
    if stays_pending:
        result["reboot_required"] = True
        gpu_plan["create"] = []
        result["actions"] = describe_plan(gpu, gpu_plan)
        destroyed = set(gi["id"] for gi in gpu_plan["destroy"])
        result["instances_after"] = sorted(gi["profile"] for gi in gpu["instances"] if gi["id"] not in destroyed)


def _failure(error_type, message, smi, details=None):
    exc = error_type(message)
    exc.details = dict(details or {}, commands=smi.commands)
    return exc


def load_entries(params, host):
    """The layout entries: inline, or from a mig-parted v1 file under the host's root."""
    if params["layout"] is not None:
        if not params["layout"]:
            raise InputError("layout is empty; give at least one entry like {devices: all, mig_enabled: true, mig_devices: {'1g.10gb': 7}}")
        return [normalize_entry(dict((k, v) for k, v in entry.items() if v is not None), "layout[%d]" % i)
                for i, entry in enumerate(params["layout"])]
    if not HAS_YAML:
        exc = StateError(missing_required_lib("PyYAML (for config_file)"))
        exc.details = {"exception": YAML_ERROR}
        raise exc
    path = params["config_file"]
    try:
        with open(host.path(path, "config_file"), "r", encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except (OSError, IOError) as exc:
        raise InputError("config_file %s cannot be read: %s" % (path, exc))
    except UnicodeDecodeError as exc:
        raise InputError("config_file %s is not UTF-8 text (%s): convert it (iconv -t UTF-8) and run again; "
                         "nothing was changed" % (path, undecodable(exc)))
    except yaml.YAMLError as exc:
        raise InputError("config_file %s is not valid YAML: %s" % (path, exc))
    return select_mig_parted_config(document, params["config"], path)


def nvidia_smi_path(params, host):
    """The nvidia-smi to run: the ``nvidia_smi`` option or nvidia-smi on PATH."""
    return program_path(host, params["nvidia_smi"], "nvidia_smi", "nvidia-smi",
                        "install the NVIDIA driver utilities on this host")


def read_gpus(smi):
    """Every GPU nvidia-smi lists, with its processes and, in MIG mode, its profiles,
    placements and instances."""
    gpus = smi.gpus()
    procs = smi.processes()
    for gpu in gpus:
        gpu["processes"] = [p for p in procs if p["gpu"] == gpu["index"]]
        gpu["instances"] = []
        gpu["profiles"], gpu["placements"] = [], {}
        if gpu["mig_mode"]["current"] == "enabled":
            gpu["profiles"], gpu["placements"] = smi.profiles(gpu["index"])
            gpu["instances"] = smi.instances(gpu["index"])
    return gpus


class GpuApplier:
    """Applies one GPU's plan through nvidia-smi, recording each step that changed the GPU."""

    def __init__(self, smi, reset_policy, run):
        self.smi = smi
        self.reset_policy = reset_policy
        self.run = run

    def apply(self, gpu, entry, plan):
        """Apply one GPU's plan; returns (reset_performed, reboot_required, messages)."""
        index = gpu["index"]
        reset_performed, reboot_required, messages = False, False, []
        if plan["destroy"]:
            self.smi.destroy(index, [gi["id"] for gi in plan["destroy"]])
            self.run.changed = True
        if plan["mode"]:
            want_enabled = plan["mode"] == "enable"
            if not plan.get("mode_already_pending") or not plan.get("reset_needed", True):
                text, results = self.smi.set_mode(index, want_enabled)
                self.run.changed = True
                messages.extend(line for line in text.splitlines() if line.startswith("Warning"))
                if not results:
                    raise NvidiaSmiError("GPU %d: nvidia-smi -mig gave no result: %s" % (index, text.strip()))
            state = self._mode_of(index)
            target = "enabled" if want_enabled else "disabled"
            if state["current"] != target and not plan.get("reset_needed", True):
                # Hopper: no reset or reboot makes it current, an idle GPU does (mig.mode_switch_without_reset)
                raise StateError("MIG mode change to %s is pending on %s (%s): a Hopper GPU takes it without a reset "
                                 "or reboot once no client holds it; stop the GPU's clients (nvidia-smi, "
                                 "nvidia-persistenced, DCGM) and run again" % (target, gpu["bus_id"], gpu.get("name")))
            if state["current"] != target:
                if self.reset_policy == "auto" and not self._busy(index):
                    rc, text, outcome = self.smi.reset(index)
                    if outcome.get(gpu["bus_id"]) == "reset" or (rc == 0 and "successfully reset" in text):
                        reset_performed = True
                        self.run.changed = True
                    else:
                        messages.append("GPU %d: reset refused: %s" % (index, " ".join(text.split())[:300]))
                    state = self._mode_of(index)
                if state["current"] != target:
                    reboot_required = True
                    plan["create"] = []
                    messages.append("GPU %d: MIG mode change to %s is pending; %s" % (
                        index, target, "reboot the host (reset: never)" if self.reset_policy == "never"
                        else "the GPU is in use; reboot the host or stop its clients and run again"))
                    return reset_performed, reboot_required, messages
        if entry["mig_enabled"]:
            create = plan["create"]
            if not plan["profiles_checked"]:
                # The mode just became current: now the GPU lists its profiles; plan again.
                fresh = dict(gpu)
                fresh["mig_mode"] = self._mode_of(index)
                fresh["profiles"], fresh["placements"] = self.smi.profiles(index)
                fresh["instances"] = self.smi.instances(index)
                again = plan_gpu(fresh, entry, self.reset_policy)
                if again["errors"]:
                    raise InputError("; ".join(again["errors"]) + " (MIG mode was enabled; no instances were created)")
                if again["destroy"]:
                    self.smi.destroy(index, [gi["id"] for gi in again["destroy"]])
                    self.run.changed = True
                create = again["create"]
                plan.update(create=create, keep=again["keep"], profiles_checked=True)
                by_name = {p["name"]: p for p in fresh["profiles"]}
            else:
                by_name = {p["name"]: p for p in gpu["profiles"]}
            if create:
                self.smi.create(index, [by_name[name]["id"] for name in create])
                self.run.changed = True
        return reset_performed, reboot_required, messages

    def _mode_of(self, index):
        for gpu in self.smi.gpus():
            if gpu["index"] == index:
                return gpu["mig_mode"]
        raise NvidiaSmiError("GPU %d disappeared from nvidia-smi --query-gpu" % index)

    def _busy(self, index):
        return any(p["gpu"] == index for p in self.smi.processes())
