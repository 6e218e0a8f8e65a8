# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate (module ``preflight_info``), run in the controller's process when its host
is a captured tree on the controller: the task's connection is ``local``, without become or
async, its Python (``ansible_python_interpreter``) is the one running ansible-playbook, and its
``root`` is not ``/``. That is the preview of a capture, where a module process
would do nothing but compile again the code this process has already imported (Python's zipimport
compiles each file of a module's zip twice, and the gate imports every stage's checks). The options
are validated and the gate runs as the module would run it (module_utils ``host/runner.run_here``);
everywhere else the module is shipped to the host and run there.

On a host, a run of the gate hands back the reads it made of the host (its ``host_reads``, module_utils
``host/reads.py``), which this plugin keeps in its cache (``GPUVIRT_TENANCY_GATE_CACHE``, default
``~/.cache/gpuvirt.tenancy/gate``; ``off`` keeps none) for the same code, options, check and diff mode,
become and Python setting, with the Python the gate ran with. The next run makes those reads again in one
command on the host: a standard-library program (module_utils ``host/read_again.py``, with only the seam's
sources) run by that Python with the program on stdin, as a pipelined module is run, but without AnsiballZ
and ``ansible.module_utils.basic``, whose imports cost as much as the reads. Where every answer is the one
the gate had, the gate's result then is its result now, and the gate's call, which compiles every stage's
checks on the host, is not made; where one differs (or the program fails, or nothing is kept, or modules
are not pipelined on this connection), the gate runs as before and its reads are kept for the next run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import sys

from ansible.plugins.action import ActionBase
from ansible.plugins.action.normal import ActionModule as ModuleAction
from ansible.release import __version__ as ANSIBLE_VERSION
from ansible.utils.vars import merge_hash

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import read_again
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_here
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.reads import describe
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import info
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import atomic_write

CACHE_VARIABLE = "GPUVIRT_TENANCY_GATE_CACHE"
PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the code a gate's run ships: a change to any of it is another gate (digested once per process)
SHIPPED = ("module_utils", "modules")
_CODE = {}


def cache_directory():
    """Where the gates' reads are kept, or None when ``GPUVIRT_TENANCY_GATE_CACHE`` is ``off`` or empty."""
    value = os.environ.get(CACHE_VARIABLE)
    if value is not None:
        return None if value.strip() in ("", "off") else value
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpuvirt.tenancy", "gate")


def code_digest():
    """A digest of this collection's module code (what the gate's module ships) and ansible-core's version."""
    if "digest" not in _CODE:
        digest = hashlib.sha256(ANSIBLE_VERSION.encode("utf-8"))
        for folder in SHIPPED:
            for directory, _dirs, files in sorted(os.walk(os.path.join(PLUGINS, folder))):
                for name in sorted(name for name in files if name.endswith(".py")):
                    path = os.path.join(directory, name)
                    with open(path, "rb") as handle:
                        digest.update(os.path.relpath(path, PLUGINS).encode("utf-8") + b"\0" + handle.read() + b"\0")
        _CODE["digest"] = digest.hexdigest()
    return _CODE["digest"]


class GateReads:
    """The reads and result of one host's last gate run with one set of options (``key``), in one
    JSON file of the cache directory, written whole (a rename), readable by this user only."""

    def __init__(self, directory, host, key):
        self.path = os.path.join(directory, hashlib.sha256(host.encode("utf-8")).hexdigest()[:24] + ".json")
        self.host, self.key = host, key

    def load(self):
        try:
            with open(self.path, "r", encoding="utf-8") as handle:
                entry = json.load(handle)
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != self.key or entry.get("host") != self.host \
                or not isinstance(entry.get("interpreter"), str):
            return None
        return entry

    def save(self, recorded, result, interpreter):
        entry = {"host": self.host, "key": self.key, "records": recorded["records"], "digests": recorded["digests"],
                 "python": recorded["python"], "interpreter": interpreter, "result": result}
        try:
            text = json.dumps(entry)
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            atomic_write(self.path, text, mode=0o600)
        except (OSError, TypeError, ValueError):
            self.drop()

    def drop(self):
        try:
            os.unlink(self.path)
        except OSError:
            pass


class ActionModule(ModuleAction):

    def _interpreter_setting(self, task_vars):
        """The task's ``ansible_python_interpreter``, templated (None where unset)."""
        interpreter = (task_vars or {}).get("ansible_python_interpreter")
        return self._templar.template(interpreter) if interpreter is not None else None

    def _runs_here(self, task_vars):
        root = self._task.args.get("root")
        if not (getattr(self._connection, "transport", None) == "local" and not self._play_context.become
                and not self._task.async_val and isinstance(root, str) and os.path.abspath(root) != os.sep):
            return False
        # the module's own Python only: another one may hold other libraries (libvirt-python)
        interpreter = self._interpreter_setting(task_vars)
        return isinstance(interpreter, str) and os.path.realpath(interpreter) == os.path.realpath(sys.executable)

    def _gate_reads(self, task_vars):
        """Where this host's last gate run with these options is kept, or None (no cache, async)."""
        directory = cache_directory()
        if directory is None or self._task.async_val:
            return None
        host = str((task_vars or {}).get("inventory_hostname") or self._play_context.remote_addr)
        key = hashlib.sha256(json.dumps(
            [code_digest(), dict(self._task.args), bool(self._task.check_mode), bool(self._task.diff),
             bool(self._play_context.become), str(self._play_context.become_user), str(self._task.delegate_to),
             self._interpreter_setting(task_vars)],
            sort_keys=True, default=str
        ).encode("utf-8")).hexdigest()
        return GateReads(directory, host, key)

    def _read_again(self, entry):
        """The kept run's reads made again on the host by the program of ``host/read_again.py``, run by
        the Python the gate ran with (``{"digests": [...], "python": [...]}``, or ``failed`` and ``msg``)."""
        program = read_again.script(os.path.join(PLUGINS, "module_utils"), entry["records"],
                                    self._task.args.get("root") or "/")
        shell = self._connection._shell  # pylint: disable=protected-access
        command = shell.build_module_command(self._compute_environment_string(), entry["interpreter"], "").strip()
        res = self._low_level_execute_command(command, sudoable=True, in_data=program.encode("utf-8"))
        lines = (res.get("stdout") or "").strip().splitlines()
        try:
            answer = json.loads(lines[-1])
        except (IndexError, ValueError):
            answer = None
        if not isinstance(answer, dict):
            return {"failed": True, "msg": "the reads made again answered no JSON (rc %s): %s"
                                           % (res.get("rc"), (res.get("stderr") or "").strip()[-300:])}
        return answer

    def _answer(self, kept, task_vars):
        """The gate's result from the kept run where its reads answer the same now, else from a run
        of the gate (kept for the next run where its reads can answer for it)."""
        changed = []
        entry = kept.load()
        if entry is not None and not self._is_pipelining_enabled("new"):
            changed = ["modules are not pipelined on this connection: the kept reads are not made again"]
        elif entry is not None:
            again = self._read_again(entry)
            digests = again.get("digests") if not again.get("failed") else None
            if digests == entry["digests"] and again.get("python") == entry["python"]:
                return dict(entry["result"], host_reads={"answered_from": "reads", "reads": len(digests),
                                                         "changed": [], "not_answerable": []})
            if isinstance(digests, list) and len(digests) == len(entry["digests"]):
                changed = [describe(record) for record, now, then in zip(entry["records"], digests, entry["digests"])
                           if now != then][:5] or ["the Python that reads is %s, not %s" % (again.get("python"), entry["python"])]
            else:
                changed = [again.get("msg") or "the reads made again answered no digests"]
        result = self._execute_module("gpuvirt.tenancy.preflight_info", dict(self._task.args, record_reads=True),
                                      task_vars=task_vars)
        recorded = result.pop("host_reads", None) or {}
        if recorded.get("answerable") and not result.get("failed") and self._used_interpreter:
            kept.save(recorded, result, self._used_interpreter)
        else:
            kept.drop()
        result["host_reads"] = {"answered_from": "module", "reads": len(recorded.get("records") or []),
                                "changed": changed, "not_answerable": recorded.get("reasons") or []}
        return result

    def run(self, tmp=None, task_vars=None):
        if not self._runs_here(task_vars):
            kept = self._gate_reads(task_vars)
            if kept is None:
                return super(ActionModule, self).run(tmp, task_vars)
            result = ActionBase.run(self, tmp, task_vars)  # pylint: disable=bad-super-call
            result = merge_hash(result, self._answer(kept, task_vars))
            self._remove_tmp_path(self._connection._shell.tmpdir)  # pylint: disable=protected-access
            return result
        return run_here("preflight_info", info.MODULE_ARGS, info.preflight_info, self._task.args,
                        check_mode=bool(self._task.check_mode), diff=bool(self._task.diff))
