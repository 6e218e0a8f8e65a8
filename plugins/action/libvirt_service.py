# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The libvirt host role's read-then-decide step: the service question built from the role's inputs
(plugin_utils libvirt_service, the same question the preflight gate asks), the play's read taken
where it answers that question (made for the same service, packages, UEFI and URI), else one
tenant_domain_info read on the host (with the play's module_defaults, as a task naming the module);
then what the role does (install, start, check, whether it has anything to do at all), a host
without dpkg or rpm refused. With ``preview``, under a captured host tree, nothing is read: the
lines that say what the role does on the host, shown as ansible.builtin.debug shows its message."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.libvirt_service import (
    LibvirtServiceError, host_plan, host_preview, read_answers, service_query)
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.module_defaults import with_module_defaults
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain

READER = "gpuvirt.tenancy.tenant_domain_info"


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(("name", "uefi", "packages", "uri", "read", "mounts", "preview"))
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = self._task.args
        try:
            preview = boolean(args.get("preview", False), strict=True)
        except TypeError:
            return dict(result, failed=True, changed=False, msg="preview (libvirt_host_preview): give true or false, got %r"
                                                                % (args.get("preview"),))
        mounts = plain(args.get("mounts") if args.get("mounts") not in (None, "") else [])
        try:
            if preview:
                # said as debug says its msg: shown without -v, a list one line per item
                lines = host_preview(args.get("uefi"), mounts, args.get("name") or "libvirtd")
                return dict(result, changed=False, msg=lines, read_here=False, _ansible_verbose_always=True)
            query = service_query(args.get("name"), args.get("uefi"), args.get("packages"))
        except LibvirtServiceError as exc:
            return dict(result, failed=True, changed=False, msg="libvirt_service: %s" % exc)
        uri = args.get("uri")
        read = plain(args.get("read") if isinstance(args.get("read"), dict) else {})
        taken = read_answers(read, query, uri)
        if not taken:
            read = self._execute_module(
                module_name=READER, module_args=with_module_defaults(
                    self._task, self._templar, READER, {"names": [], "foreign": False, "uri": uri, "service": query}),
                task_vars=task_vars)
            self._remove_tmp_path(self._connection._shell.tmpdir)
            if read.get("failed"):
                return dict(result, **read)
        service = read.get("service") if isinstance(read.get("service"), dict) else {}
        try:
            plan = host_plan(service, mounts, (task_vars or {}).get("inventory_hostname", "the host"))
        except LibvirtServiceError as exc:
            return dict(result, failed=True, changed=False, msg=str(exc), service=service, read_here=not taken)
        result.update(plan, changed=False, service=service, query=query, read_here=not taken)
        return result
