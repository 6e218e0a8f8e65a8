# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mlx_rocev2 module: ConnectX firmware parameters, the RDMA-CM default RoCE mode (and
the udev rule that keeps it), the GID table, and with ``nccl_env`` the nccl_env module's files
in the same call (written, or with ``nccl_env_write: false`` only decided and reported).
Everything is decided before anything is changed; the host is read and changed only through the
injected :class:`Host`."""

from __future__ import absolute_import, division, print_function

import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nccl_conf
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import (
    InputError, StateError, check_line_value)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.packages import check_packages, missing_packages
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import normalize_address
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.rdma import (
    PERSIST_SCRIPT, RdmaReader, RoceModeConfig, parse_ibv_devices, persist_rule, roce_v2_ipv4_indexes)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import is_mac

__metaclass__ = type


def mlx_rocev2(params, host, run):
    """The mlx_rocev2 module's result fields."""
    if not params["device"] and not params["rdma_device"] and not params.get("netdev_mac"):
        raise InputError("device or rdma_device: give the ConnectX PF's PCI address (device) and/or the RDMA "
                         "device name (rdma_device, e.g. mlx5_0 or rxe0), or the MAC of its netdev (netdev_mac)")
    wanted_packages = check_packages(params["packages"]) if params.get("packages") is not None else None
    nccl_options = None
    if params["nccl_env"] is not None:
        nccl_options = nested_params("nccl_env", "gpuvirt.tenancy.nccl_env", nccl_conf.MODULE_ARGS, params["nccl_env"])
    result = {"reboot_required": False}
    diff = {"before": {}, "after": {}}
    reader = RdmaReader(host.fs)
    planned_fw = plan_firmware(params, host, result, diff)
    mode = None if params["default_roce_mode"] == "unchanged" else params["default_roce_mode"]
    by_mac = found_by_mac(params, reader) if params.get("netdev_mac") and not params["rdma_device"] else None
    if by_mac is not None:
        result["netdev"], params = by_mac[0], dict(params, rdma_device=by_mac[1])
        if nccl_options is not None and not nccl_options["ib_hca"]:
            # the device found is the one NCCL uses
            nccl_options = dict(nccl_options, ib_hca=["%s:%d" % (by_mac[1], params["port"])])
    dev = rdma_device(params, reader) if (params["rdma_device"] or mode) else None
    plan = plan_mode(params, host, reader, dev, diff) if dev and mode else None
    # the RDMA-CM default mode does not change the GID table, so NCCL is decided before any step
    nccl = decide_nccl(nccl_options, params["nccl_env_write"], host) if nccl_options is not None else None
    apply_firmware(params, planned_fw, run, result)
    if plan:
        apply_mode(params, host, dev, plan, run, result)
    if dev:
        rows = reader.full_table([dev])
        result["rdma_device"] = dev
        result["port"] = params["port"]
        result["gid_table"] = rows
        result["roce_v2_ipv4_index"] = roce_v2_ipv4_indexes(rows)
        result["verbs"] = verbs_view(host, dev)
    if wanted_packages is not None:
        result["packages"] = missing_packages(host, wanted_packages)
    run.diff.extend([diff])
    if isinstance(nccl, nccl_conf.Decision):
        # the guest stage's GPUDirect RDMA check: said, never a failure
        result["gpudirect"] = nccl.result["gpudirect"]
        if nccl.result["gpudirect"]["message"]:
            run.warn(nccl.result["gpudirect"]["message"])
        result["nccl_env"] = (nccl_conf.apply(nccl, nccl_options, host, run) if params["nccl_env_write"]
                              else nccl_conf.plan(nccl))
    elif nccl is not None:
        result["nccl_env"] = {"error": nccl}
    return result


def verbs_view(host, dev):
    """Whether the verbs library sees RDMA device ``dev`` (what NCCL and ibv_* programs open):
    {tool, devices, seen}, by ``ibv_devices``; without that program (ibverbs-utils) devices and
    seen are None: nothing can be said."""
    tool = host.commands.which("ibv_devices")
    if tool is None:
        return {"tool": None, "devices": None, "seen": None}
    rc, out, err = host.commands.run([tool], check=False)
    if rc != 0:
        raise StateError("%s failed (exit %d): %s" % (tool, rc, (err or out).strip()[:300]))
    devices = parse_ibv_devices(out)
    return {"tool": tool, "devices": devices, "seen": dev in devices}


def decide_nccl(options, write, host):
    """nccl_env's decision. When it is to be written, an error stops the call before any step;
    when only reported, the error is the answer (a message), for the caller to act on after
    comparing the hosts (the guest_rdma role runs nccl_env alone there, which fails with it)."""
    if write:
        return nccl_conf.decide(options, host)
    try:
        return nccl_conf.decide(options, host)
    except (InputError, StateError) as exc:
        return str(exc)


# -- firmware ----------------------------------------------------------------------------
def plan_firmware(params, host, result, diff):
    wanted = params["firmware"] or {}
    device = params["device"]
    if wanted and not device:
        raise InputError("device: firmware settings need the PCI address of the ConnectX PF in device")
    if not device:
        return None
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx  # guests pass no PF: not compiled there
    mlx.check_values(wanted)
    address = normalize_address(device)
    if address and not host.fs.exists("/sys/bus/pci/devices/%s" % address):
        raise InputError("device: no PCI device %s on this host: give the address of the ConnectX PF "
                         "as 'lspci -D -d 15b3:' lists it" % device)
    path = mlx.find_tool(host, params["tool"])
    if not path:
        raise InputError("tool: %s not found on the host: install NVIDIA MFT (mlxconfig) or mstflint (mstconfig), "
                         "or set tool to the one installed" % " / ".join(mlx.tool_names(params["tool"])))
    fw = mlx.FirmwareConfig(path, device, host)
    parsed = fw.query()
    changes = fw.plan(parsed, wanted)
    result["firmware_tool"] = fw.tool
    result["firmware_changes"] = dict((k, mlx.render_value(v)) for k, v in changes.items())
    before = dict((k, v["next"]) for k, v in mlx.report(parsed, wanted).items())
    diff["before"]["firmware"] = before
    diff["after"]["firmware"] = dict(before, **result["firmware_changes"])
    return fw, parsed, changes


def apply_firmware(params, planned, run, result):
    if planned is None:
        return
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx  # as in plan_firmware
    fw, parsed, changes = planned
    wanted = params["firmware"] or {}
    if changes:
        if not run.check_mode:
            fw.set(changes)
            run.changed = True
            parsed = fw.query()
            still = fw.plan(parsed, wanted)
            if still:
                raise StateError("firmware: %s accepted the set but Next Boot still differs for %s"
                                 % (fw.tool, ", ".join(sorted(still))))
        else:
            run.changed = True
            for key, value in changes.items():
                parsed["params"][key]["next"] = mlx.render_value(value)
    result["firmware"] = mlx.report(parsed, wanted)
    pending = []
    for key, entry in parsed["params"].items():
        if entry.get("current") is None:
            continue
        if key in changes and run.check_mode:
            if not mlx.value_matches(changes[key], entry["current"]):
                pending.append(key)
        elif entry["current"] != entry["next"]:
            pending.append(key)
    result["pending_parameters"] = sorted(pending)
    result["reboot_required"] = bool(pending)


def found_by_mac(params, reader):
    """-> (netdev, RDMA device) that carries ``netdev_mac``, or InputError saying what is there."""
    mac = str(params["netdev_mac"]).lower()
    if not is_mac(mac):
        raise InputError("netdev_mac: %r is not a MAC address like 52:54:00:12:34:56" % params["netdev_mac"])
    found = reader.device_for_netdev_mac(mac)
    if found is None:
        raise InputError("netdev_mac: no netdev carries %s (is the VF passed through and its driver, mlx5_core or igbvf, "
                         "loaded? 'ip -br link' lists the netdevs and their MACs)" % mac)
    if found[1] is None:
        raise InputError("netdev_mac: netdev %s (%s) has no RDMA device: load mlx5_ib, or create a soft-RoCE device on it "
                         "(rdma link add rxe0 type rxe netdev %s)" % (found[0], mac, found[0]))
    return found


# -- RDMA-CM default RoCE mode -------------------------------------------------------------
def rdma_device(params, reader):
    name = params["rdma_device"]
    if name:
        if name not in reader.devices():
            raise InputError("rdma_device: no RDMA device %s (known: %s): check 'rdma link show'"
                             % (name, ", ".join(reader.devices()) or "none"))
        return name
    device = params["device"]
    if device:
        found = reader.device_for_pci(normalize_address(device) or device.lower())
        if found:
            return found[0]
        raise InputError("rdma_device: PF %s has no RDMA device (is mlx5_core/mlx5_ib loaded?); "
                         "name it in rdma_device" % device)
    return None


def plan_mode(params, host, reader, dev, diff):
    port = params["port"]
    if port not in reader.ports(dev):
        raise InputError("port: %s has no port %d (ports: %s)" % (dev, port, reader.ports(dev)))
    mode = params["default_roce_mode"]
    if params["persist"]:
        udev_device_name(dev)
    config = RoceModeConfig(host)
    loaded = config.available()
    current = config.read(dev, port) if loaded else None
    if loaded and current is None:
        raise StateError("rdma_cm has no port %d for %s in configfs" % (port, dev))
    diff["before"]["default_roce_mode"] = current
    diff["after"]["default_roce_mode"] = mode
    plan = {"config": config, "load": not loaded, "set": current != mode, "files": {}}
    if params["persist"]:
        script, rule_path = persist_paths(params, host, dev)
        for path, content in ((script, PERSIST_SCRIPT), (rule_path, persist_rule(dev, port, mode, script))):
            option = "persist_script" if path == script else "persist_rules_dir"
            old = host.read_text(path, option)
            if old != content:
                plan["files"][path] = content
            diff["before"][path] = old or ""
            diff["after"][path] = content
    return plan


# What a udev rule can hold of an RDMA device name as it is: KERNEL=="..." is a glob and RUN+="..."
# substitutes %k / $kernel and ends at a quote, so a name with anything else (a quote, a blank, a
# glob or substitution character) could match other devices or add a command to the rule.
UDEV_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}\Z")


def udev_device_name(dev):
    if not UDEV_NAME.match(dev):
        raise InputError("rdma_device: %r cannot go into a udev rule (KERNEL==\"...\" and RUN+=\"...\" take letters, "
                         "digits and _.:- only): rename the device (rdma dev set %s name mlx5_0) or set persist: false"
                         % (dev, dev))
    return dev


def persist_paths(params, host, dev):
    """(script, rule file) host paths, checked before anything changes: the script path goes
    into the udev rule's RUN+="..." (absolute, no blank or quote), and neither may name a
    directory or sit under a file."""
    script = check_line_value(params["persist_script"], "persist_script")
    if not script.startswith("/") or any(char.isspace() or char in "\"'\\%$" for char in script):
        raise InputError("persist_script: %r goes into the udev rule's RUN+=\"...\": give an absolute path without "
                         "blanks, quotes, backslashes, %% or $" % script)
    rules_dir = check_line_value(params["persist_rules_dir"], "persist_rules_dir")
    host.path(rules_dir, "persist_rules_dir")
    if host.fs.exists(rules_dir) and not host.fs.isdir(rules_dir):
        raise InputError("persist_rules_dir: %s is not a directory; give the udev rules directory "
                         "(/etc/udev/rules.d)" % rules_dir)
    rule_path = os.path.join(rules_dir, "70-gpuvirt-roce-%s.rules" % dev)
    host.file_target(script, "persist_script", create_parent=True)
    host.file_target(rule_path, "persist_rules_dir", create_parent=True)
    return script, rule_path


def apply_mode(params, host, dev, plan, run, result):
    port, mode = params["port"], params["default_roce_mode"]
    if run.check_mode:
        if plan["load"] or plan["set"] or plan["files"]:
            run.changed = True
        result["default_roce_mode"] = mode
        return
    config = plan["config"]
    if plan["load"]:
        modprobe = host.commands.which("modprobe", required=True, hint="install kmod")
        rc, _out, err = host.commands.run([modprobe, "rdma_cm"], check=False)
        if rc != 0 or not config.available():
            raise StateError("cannot load rdma_cm (%s): is configfs mounted on /sys/kernel/config?" % err.strip())
        run.changed = True
        plan["set"] = config.read(dev, port) != mode
    if plan["set"]:
        config.write(dev, port, mode)
        run.changed = True
    for path, content in sorted(plan["files"].items()):
        real = host.path(path, "persist_script" if path == params["persist_script"] else "persist_rules_dir")
        try:
            host.files.makedirs(os.path.dirname(real))
            host.files.write(real, content, mode=0o755 if path == params["persist_script"] else 0o644)
        except (OSError, IOError) as exc:
            error = StateError("writing %s failed (%s)%s" % (path, exc.strerror or exc, "; the RDMA-CM default RoCE "
                                                             "mode was already set" if run.changed else ""))
            error.details = {"default_roce_mode": config.read(dev, port)}
            raise error
        run.changed = True
    result["default_roce_mode"] = config.read(dev, port)
