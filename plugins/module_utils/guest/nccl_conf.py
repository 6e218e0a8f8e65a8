# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``/etc/nccl.conf``: the ``KEY=VALUE`` lines NCCL reads at init, and the GID index choice.

The GID index NCCL uses on RoCE must name a RoCE v2 GID with an IPv4 address on every HCA
port it uses; a wrong index hangs or fails NCCL init (``ibv_modify_qp failed with error No
such device``). ``gid_index`` is either an integer (checked against each port's table),
``discover`` (the RoCE v2 + IPv4 index read from the table), or ``auto`` (NCCL >= 2.21 picks
the GID itself from ``NCCL_IB_ADDR_FAMILY`` / ``NCCL_IB_ADDR_RANGE`` /
``NCCL_IB_ROCE_VERSION_NUM``).

With ``hosts_entries`` the same run also writes the tenants' RDMA addresses as a marked block
of the hosts file (``hosts_block``), so a guest costs one module call for both files.

``decide`` reads both files and decides them, ``apply`` writes what differs; ``plan`` reports a
decision without writing, for a caller (mlx_rocev2's ``nccl_env`` option with
``nccl_env_write: false``) that decides the write across hosts on the controller.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import json
import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.hosts_block import block_found, block_lines, check_marker, render_block
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo import check_links
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo_edit import FileEdit, topo_edit
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_vm import check_relaxed_ordering, gpudirect_state
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.rdma import (
    ROCE_V2, RdmaReader, format_gid_table, roce_v2_ipv4_index)

__metaclass__ = type

# The module's argument spec (plugins/modules/nccl_env.py), here so that another module can run
# nccl_env inside its own call (runner.nested_params) with the same validation.
MODULE_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
        path=dict(type="path", default="/etc/nccl.conf"),
        ib_hca=dict(type="list", elements="str", default=[]),
        socket_ifname=dict(type="str"),
        net_gdr_level=dict(type="str"),
        ib_pci_relaxed_ordering=dict(type="str"),
        gid_index=dict(type="str", default="discover"),
        addr_range=dict(type="str"),
        nccl_version=dict(type="str"),
        extra=dict(type="dict", default={}),
        hosts_entries=dict(type="list", elements="dict", options=dict(
            ip=dict(type="str", required=True),
            names=dict(type="list", elements="str", required=True),
        )),
        hosts_path=dict(type="path", default="/etc/hosts"),
        hosts_marker=dict(type="str", default="# {mark} gpuvirt.tenancy guest_rdma"),
        topo_file=dict(type="path", default="/etc/nccl-topo.xml"),
        topo_links=dict(type="dict"),
        backup=dict(type="bool", default=False),
    ),
)

LINE_RE = re.compile(r"^\s*(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=(?P<value>.*)$")
KEY_RE = re.compile(r"^[A-Z][A-Z0-9_]*\Z")
# NCCL_NET_GDR_LEVEL as NCCL reads it (NCCL User Guide, Environment Variables,
# NCCL_NET_GDR_LEVEL (formerly NCCL_IB_GDR_LEVEL):
# https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html): the path types LOC,
# PIX, PXB, PHB, SYS, or the legacy integers 0-5 of the older guides.
GDR_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")
GDR_LEVEL_NUMBERS = ("0", "1", "2", "3", "4", "5")
GID_KEYS = ("NCCL_IB_GID_INDEX",)
AUTO_KEYS = ("NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE", "NCCL_IB_ROCE_VERSION_NUM")
AUTO_MIN_VERSION = (2, 21)


def parse_conf(text):
    """{key: value} of the KEY=VALUE lines (the last one wins, as for NCCL)."""
    values = {}
    for line in (text or "").splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = LINE_RE.match(line)
        if match:
            values[match.group("key")] = match.group("value").strip()
    return values


def render_conf(text, settings):
    """Apply ``settings`` ({key: value, or None to remove}) to the file text. Lines the
    settings do not name (comments, other keys) are kept byte for byte; a managed key is
    rewritten in place (duplicates dropped) or appended, always as ``KEY=VALUE`` and LF: NCCL
    reads a line up to its ``\n`` only (``setEnvFile`` in src/misc/param.cc), so in a CRLF line
    the value would end in ``\r``, and blanks around ``=`` would belong to the name or value."""
    text = text or ""
    lines = text.splitlines(True)
    newline = "\n"
    out = []
    seen = set()
    for line in lines:
        body = line.rstrip("\r\n")
        ending = line[len(body):]
        match = None if body.lstrip().startswith("#") else LINE_RE.match(body)
        key = match.group("key") if match else None
        if key in settings:
            if settings[key] is None or key in seen:
                continue
            seen.add(key)
            wanted = "%s=%s" % (key, settings[key])
            out.append(line if body == wanted and ending in ("", newline) else wanted + newline)
        else:
            out.append(line)
    for key in sorted(settings):
        if settings[key] is not None and key not in seen:
            if out and not out[-1].endswith(("\n", "\r")):
                out[-1] += newline
            out.append("%s=%s%s" % (key, settings[key], newline))
    return "".join(out)


def check_gdr_level(value):
    """NCCL_NET_GDR_LEVEL: one of the levels NCCL documents (GDR_LEVELS, GDR_LEVEL_NUMBERS)."""
    text = str(value).strip()
    if text.upper() in GDR_LEVELS:
        return text.upper()
    if text in GDR_LEVEL_NUMBERS:
        return text
    raise InputError("net_gdr_level: %r is not a level NCCL knows; use %s (or the legacy %s-%s)"
                     % (value, ", ".join(GDR_LEVELS), GDR_LEVEL_NUMBERS[0], GDR_LEVEL_NUMBERS[-1]))


# NCCL_IB_HCA as NCCL reads it (NCCL User Guide, Environment Variables, NCCL_IB_HCA:
# https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-hca): a
# comma-separated list of DEVICE or DEVICE:PORT; an optional leading ``^`` makes it an exclude
# list; a second optional prefix ``=`` makes the names exact, otherwise each name is a prefix
# (``mlx5_1`` also selects mlx5_10..mlx5_19). Examples there: ``mlx5``, ``=mlx5_0:1,mlx5_1:1``,
# ``^=mlx5_1,mlx5_4``.
HCA_ENTRY_RE = re.compile(r"^(?P<device>[A-Za-z0-9_.-]+)(?::(?P<port>[0-9]+))?\Z")
HCA_SYNTAX = "[^][=]DEVICE[:PORT],... (for example mlx5_0:1, =mlx5_0:1,mlx5_1:1 or ^=mlx5_1)"


def parse_hca(entries, option="ib_hca"):
    """The ib_hca list (joined with commas, as it is written to NCCL_IB_HCA) ->
    ``{"exclude": bool, "exact": bool, "entries": [(device, port or None)]}``. An empty
    entry is refused (an empty NCCL_IB_HCA is not "every HCA" to every reader)."""
    items = [check_line_value(entry, option).strip() for entry in entries or []]
    for position, item in enumerate(items):
        if not item:
            raise InputError("%s: entry %d is empty; remove it (an empty list selects every HCA) or give "
                             "DEVICE[:PORT]" % (option, position))
    text = ",".join(items)
    spec = {"exclude": False, "exact": False, "entries": []}
    if not text:
        return spec
    if text.startswith("^"):
        spec["exclude"], text = True, text[1:]
    if text.startswith("="):
        spec["exact"], text = True, text[1:]
    for item in text.split(","):
        match = HCA_ENTRY_RE.match(item.strip())
        if not match:
            raise InputError("%s: %r is not DEVICE or DEVICE:PORT; NCCL_IB_HCA is %s, the ^ and = prefixes "
                             "only before the first entry" % (option, item, HCA_SYNTAX))
        port = match.group("port")
        spec["entries"].append((match.group("device"), int(port) if port else None))
    return spec


def render_hca(spec):
    """NCCL_IB_HCA as written: the parsed entries again, so the file holds what was checked."""
    return "%s%s%s" % ("^" if spec["exclude"] else "", "=" if spec["exact"] else "", ",".join(
        device if port is None else "%s:%d" % (device, port) for device, port in spec["entries"]))


# NCCL_SOCKET_IFNAME (NCCL User Guide, Environment Variables, NCCL_SOCKET_IFNAME): a
# comma-separated list of interface name prefixes, ``^`` to exclude, ``=`` for exact names. A
# Linux interface name has no blank, '/' or ':' (dev_valid_name) and at most 15 characters.
IFNAME_LIST_RE = re.compile(r"^\^?=?[^\s,/:=^]{1,15}(,[^\s,/:=^]{1,15})*\Z")


def check_socket_ifname(value, option="socket_ifname"):
    """NCCL_SOCKET_IFNAME as written: stripped, each name checked."""
    text = check_line_value(value, option).strip()
    if not IFNAME_LIST_RE.match(text):
        raise InputError("%s: %r is not NCCL_SOCKET_IFNAME's [^][=]NAME,NAME... (interface names without blanks, "
                         "'/' or ':', at most 15 characters, separated by commas: 'eth0,eth1', not 'eth0 eth1')"
                         % (option, value))
    return text


def hca_ports(spec, known, ports_of, option="ib_hca"):
    """The (device, port) pairs NCCL would use under ``spec`` among the ``known`` devices;
    ``ports_of(device)`` -> its ports. Every device or port a selecting (not excluding) entry
    names must exist."""
    def named(entry_device, device):
        return device == entry_device if spec["exact"] else device.startswith(entry_device)

    everything = [(dev, port) for dev in known for port in ports_of(dev)]
    if not spec["entries"]:
        return everything
    if spec["exclude"]:
        return [(dev, port) for dev, port in everything
                if not any(named(d, dev) and p in (None, port) for d, p in spec["entries"])]
    chosen = []
    for entry_device, entry_port in spec["entries"]:
        devices = [dev for dev in known if named(entry_device, dev)]
        if not devices:
            raise InputError("%s: no RDMA device %s%s on this host (known: %s): check 'rdma link show'"
                             % (option, entry_device, "" if spec["exact"] else "*", ", ".join(known) or "none"))
        pairs = [(dev, port) for dev in devices for port in ports_of(dev) if entry_port in (None, port)]
        if not pairs:
            raise InputError("%s: %s has no port %d (ports: %s)" % (option, devices[0], entry_port, ports_of(devices[0])))
        chosen.extend(pair for pair in pairs if pair not in chosen)
    return chosen


def parse_version(text):
    match = re.match(r"^\s*(\d+)\.(\d+)", str(text or ""))
    if not match:
        raise InputError("nccl_version: expected a version like 2.21.5, got %r" % text)
    return int(match.group(1)), int(match.group(2))


def parse_gid_index(value):
    """'discover' / 'auto' / an int (given as int or digit string)."""
    if isinstance(value, bool):
        raise InputError("gid_index: expected an integer, 'discover' or 'auto', got %r" % value)
    if isinstance(value, int):
        index = value
    else:
        text = str(value).strip().lower()
        if text in ("discover", "auto"):
            return text
        if not re.match(r"^[0-9]+\Z", text):
            raise InputError("gid_index: expected an integer, 'discover' or 'auto', got %r" % value)
        index = int(text)
    if index < 0 or index > 255:
        raise InputError("gid_index: %d is out of range (GID indexes are 0-255)" % index)
    return index


def _port_label(dev, port):
    return "%s:%s" % (dev, port)


def check_index(index, tables):
    """Every port's table must hold a RoCE v2 + IPv4 GID at ``index``; raise with the table
    otherwise. ``tables``: {(dev, port): rows}."""
    bad = []
    for (dev, port), rows in sorted(tables.items()):
        row = next((r for r in rows if r["index"] == index), None)
        if row is None:
            bad.append("%s has no GID at index %d" % (_port_label(dev, port), index))
        elif row["type"] != ROCE_V2 or not row["ipv4"]:
            bad.append("%s index %d is %s %s (%s), not RoCE v2 with an IPv4 address"
                       % (_port_label(dev, port), index, row["type"], row["gid"], row["ipv4"] or "no IPv4"))
    if bad:
        all_rows = [r for _key, rows in sorted(tables.items()) for r in rows]
        hint = discover_hint(tables)
        raise InputError("gid_index %d refused: %s.%s\nGID table:\n%s"
                         % (index, "; ".join(bad), hint, format_gid_table(all_rows)))


def discover_hint(tables):
    found = {}
    for key, rows in tables.items():
        found[_port_label(*key)] = roce_v2_ipv4_index(rows)
    good = sorted(set(v for v in found.values() if v is not None))
    if len(good) == 1 and all(v is not None for v in found.values()):
        return " The RoCE v2 + IPv4 GID is at index %d: use gid_index: %d or gid_index: discover." % (good[0], good[0])
    return ""


def discover_index(tables):
    """The one index holding RoCE v2 + IPv4 on every port, or raise with the table."""
    if not tables:
        raise InputError("gid_index: no RDMA port to read a GID table from: list the HCAs in ib_hca "
                         "(check 'rdma link show') or load the RDMA driver first")
    found = {}
    for key, rows in sorted(tables.items()):
        found[key] = roce_v2_ipv4_index(rows)
    all_rows = [r for _key, rows in sorted(tables.items()) for r in rows]
    missing = [_port_label(*k) for k, v in found.items() if v is None]
    if missing:
        raise InputError("gid_index discover: no RoCE v2 GID with an IPv4 address on %s: give the netdev an "
                         "IPv4 address and check the RDMA-CM mode.\nGID table:\n%s"
                         % (", ".join(missing), format_gid_table(all_rows)))
    indexes = sorted(set(found.values()))
    if len(indexes) > 1:
        raise InputError("gid_index discover: the RoCE v2 + IPv4 GID sits at different indexes on the listed "
                         "ports (%s); NCCL_IB_GID_INDEX is one number for all HCAs: use gid_index: auto "
                         "(NCCL >= 2.21) or list only matching HCAs.\nGID table:\n%s"
                         % (", ".join("%s=%d" % (_port_label(*k), v) for k, v in sorted(found.items())),
                            format_gid_table(all_rows)))
    return indexes[0]


def check_auto(tables, addr_range, nccl_version):
    """NCCL's own selection needs >= 2.21 and a RoCE v2 IPv4 GID within the range on every port."""
    if nccl_version is not None and parse_version(nccl_version) < AUTO_MIN_VERSION:
        raise InputError("gid_index auto needs NCCL >= 2.21 (nccl_version is %s): use discover or an integer"
                         % nccl_version)
    try:
        network = ipaddress.ip_network(addr_range, strict=False)
    except ValueError as exc:
        raise InputError("addr_range: %r is not an IPv4 network in CIDR form such as 192.168.64.0/24 (%s)"
                         % (addr_range, exc))
    if network.version != 4:
        raise InputError("addr_range: %s is not IPv4; gid_index auto pins AF_INET" % addr_range)
    missing = []
    for key, rows in sorted(tables.items()):
        if not any(r["type"] == ROCE_V2 and r["ipv4"] and ipaddress.ip_address(r["ipv4"]) in network for r in rows):
            missing.append(_port_label(*key))
    if missing:
        all_rows = [r for _key, rows in sorted(tables.items()) for r in rows]
        raise InputError("gid_index auto: no RoCE v2 GID with an IPv4 address in %s on %s; NCCL would fail at "
                         "init.\nGID table:\n%s" % (network, ", ".join(missing), format_gid_table(all_rows)))
    return str(network)


def gid_settings(mode, index=None, addr_range=None):
    """The GID-related keys to write, clearing the ones of the other mode."""
    if mode == "auto":
        settings = dict.fromkeys(GID_KEYS)
        settings.update({"NCCL_IB_ADDR_FAMILY": "AF_INET", "NCCL_IB_ADDR_RANGE": addr_range,
                         "NCCL_IB_ROCE_VERSION_NUM": "2"})
        return settings
    settings = dict.fromkeys(AUTO_KEYS)
    settings["NCCL_IB_GID_INDEX"] = str(index)
    return settings


def hca_option(params):
    """(entries, option) of the HCA list: ``ib_hca``, or ``extra.NCCL_IB_HCA`` given there
    instead (then it is checked as ib_hca is)."""
    extra = params["extra"] or {}
    if extra.get("NCCL_IB_HCA") is None:
        return params["ib_hca"], "ib_hca"
    if params["ib_hca"]:
        raise InputError("extra: NCCL_IB_HCA is managed by its own option; set it in ib_hca")
    return [str(extra["NCCL_IB_HCA"])], "extra.NCCL_IB_HCA"


def gid_tables(params, reader):
    """{(dev, port): rows} of the HCA ports ib_hca selects (all RDMA ports when it is empty)."""
    entries, option = hca_option(params)
    ports = hca_ports(parse_hca(entries, option), reader.devices(), reader.ports, option)
    return dict(((dev, port), reader.gid_table(dev, port)) for dev, port in ports)


def derive_range(host, tables):
    """The IPv4 network of the netdevs behind the RoCE v2 GIDs (``ip -j -4 addr``)."""
    netdevs = sorted(set((row["netdev"], row["ipv4"]) for rows in tables.values() for row in rows
                         if row["type"] == ROCE_V2 and row["ipv4"] and row["netdev"]))
    networks, failures = set(), []
    ip_bin = host.commands.which("ip", required=True, hint="install iproute2") if netdevs else None
    for netdev, ipv4 in netdevs:
        # a netdev that vanished since the GID table was read answers non-zero: skip it
        rc, out, err = host.commands.run([ip_bin, "-j", "-4", "addr", "show", "dev", netdev], check=False)
        if rc != 0:
            failures.append("%s: %s" % (netdev, (err or out).strip() or "rc=%d" % rc))
            continue
        for link in json.loads(out or "[]"):
            for addr in link.get("addr_info", []):
                if addr.get("local") == ipv4:
                    networks.add(str(ipaddress.ip_network("%s/%s" % (addr["local"], addr["prefixlen"]), strict=False)))
    if len(networks) != 1:
        raise InputError("addr_range: give the IPv4 network NCCL should pick GIDs from (e.g. 192.168.64.0/24); "
                         "the RoCE netdevs are on %s%s" % (", ".join(sorted(networks)) or "no IPv4 network",
                                                           " (ip failed for %s)" % "; ".join(failures) if failures else ""))
    return networks.pop()


def wanted_settings(params, host, tables, result):
    """Every managed key with its value (None: remove it)."""
    mode = parse_gid_index(params["gid_index"])
    if mode == "auto":
        addr_range = check_auto(tables, params["addr_range"] or derive_range(host, tables), params["nccl_version"])
        settings = gid_settings("auto", addr_range=addr_range)
        result["gid_index"] = "auto"
    else:
        index = discover_index(tables) if mode == "discover" else mode
        check_index(index, tables)
        settings = gid_settings("index", index=index)
        result["gid_index"] = index
    entries, option = hca_option(params)
    if entries:
        settings["NCCL_IB_HCA"] = render_hca(parse_hca(entries, option))
    if params["socket_ifname"] is not None:
        settings["NCCL_SOCKET_IFNAME"] = check_socket_ifname(params["socket_ifname"])
    if params["net_gdr_level"] is not None:
        settings["NCCL_NET_GDR_LEVEL"] = check_gdr_level(params["net_gdr_level"])
    if params["ib_pci_relaxed_ordering"] is not None:
        settings["NCCL_IB_PCI_RELAXED_ORDERING"] = check_relaxed_ordering(params["ib_pci_relaxed_ordering"])
    for key, value in (params["extra"] or {}).items():
        if not KEY_RE.match(str(key)):
            raise InputError("extra: %r is not an environment variable name such as NCCL_IB_TC" % key)
        if key in settings and not (key == "NCCL_IB_HCA" and option == "extra.NCCL_IB_HCA"):
            raise InputError("extra: %s is managed by its own option; set it there" % key)
        if key == "NCCL_IB_HCA":
            if value is None:
                settings[key] = None
            continue  # else written from hca_option above
        value = None if value is None else check_line_value(value, "extra.%s" % key).strip()
        if key == "NCCL_NET_GDR_LEVEL" and value is not None:
            value = check_gdr_level(value)
        if key == "NCCL_SOCKET_IFNAME" and value is not None:
            value = check_socket_ifname(value, "extra.NCCL_SOCKET_IFNAME")
        settings[key] = value
    return settings


def check_inputs(params):
    """Every value this module writes, checked before the host is read or changed."""
    parse_gid_index(params["gid_index"])
    for option in ("socket_ifname", "addr_range", "nccl_version"):
        check_line_value(params[option], option)
    if params["socket_ifname"] is not None:
        check_socket_ifname(params["socket_ifname"])
    entries, option = hca_option(params)
    parse_hca(entries, option)
    if params["net_gdr_level"] is not None:
        check_gdr_level(params["net_gdr_level"])
    if params["ib_pci_relaxed_ordering"] is not None:
        check_relaxed_ordering(params["ib_pci_relaxed_ordering"])
    for key, value in (params["extra"] or {}).items():
        check_line_value(key, "extra")
        check_line_value(value, "extra.%s" % key)
    if params["topo_links"] is not None:
        check_links(params["topo_links"])
        check_line_value(params["topo_file"], "topo_file")
        if "NCCL_TOPO_FILE" in (params["extra"] or {}):
            raise InputError("extra: NCCL_TOPO_FILE is managed by topo_file with topo_links; set it there")


class Decision:
    """What nccl_env would write: the NCCL file's edit, the hosts file's edit (None without
    ``hosts_entries``), the lines its marked block holds now, and the result fields."""

    def __init__(self, conf, hosts, hosts_found, result, topo=None):
        self.conf = conf
        self.hosts = hosts
        self.hosts_found = hosts_found
        self.result = result
        # the NCCL topology file's edit (None: not written, the result's topology says why)
        self.topo = topo


def hosts_edit(params, host):
    """The hosts file with the marked block of ``hosts_entries`` (None when the option is not
    given: the file is not touched), the block's lines (checked before anything is read) and
    the lines the block holds now."""
    if params["hosts_entries"] is None:
        return None, None, None
    marker = check_marker(params["hosts_marker"])
    lines = block_lines(params["hosts_entries"])
    edit = FileEdit(host, params["hosts_path"], "hosts_path")
    edit.after = render_block(edit.before, lines, marker)
    if edit.before is None and not lines:
        edit.after = None
    return edit, lines, block_found(edit.before, marker)


def check_apart(conf, hosts):
    """The NCCL file and the hosts file are two files, neither inside the other: the second
    write would otherwise undo the first, or find a directory where its file goes."""
    conf_real, hosts_real = conf.resolved, hosts.resolved
    if conf_real == hosts_real:
        raise InputError("path and hosts_path: %s and %s are the same file; give the NCCL settings a file of their own "
                         "(the default /etc/nccl.conf)" % (conf.shown, hosts.shown))
    if conf_real.startswith(hosts_real.rstrip(os.sep) + os.sep):
        raise InputError("path: %s would be made inside %s, the hosts file (hosts_path); give one of them another path"
                         % (conf.shown, hosts.shown))


def decide(params, host):
    """Resolve the GID settings and decide both files under the host's root; nothing is written."""
    conf = FileEdit(host, params["path"], "path", create_parent=True)
    # the values are checked before the GID tables are read, so a bad gid_index is named first
    check_inputs(params)
    hosts, hosts_lines, hosts_found = hosts_edit(params, host)
    if hosts is not None:
        check_apart(conf, hosts)
    tables = gid_tables(params, RdmaReader(host.fs))
    result = {"path": params["path"]}
    settings = wanted_settings(params, host, tables, result)
    topo, result["topology"] = topo_edit(params, host, (conf, hosts), sorted(set(dev for dev, _port in tables)))
    if result["topology"] is not None:
        if result["topology"]["written"]:
            settings["NCCL_TOPO_FILE"] = params["topo_file"]
        elif not result["topology"]["kept"] and parse_conf(conf.before).get("NCCL_TOPO_FILE") == params["topo_file"]:
            # the file is gone or goes now: the setting that names it goes too
            settings["NCCL_TOPO_FILE"] = None
    conf.after = render_conf(conf.before or "", settings)
    result["settings"] = dict((k, v) for k, v in sorted(settings.items()) if v is not None)
    result["removed"] = sorted(k for k, v in settings.items() if v is None and k in parse_conf(conf.before or ""))
    result["gid_table"] = [r for _k, rows in sorted(tables.items()) for r in rows]
    # read-only: whether NCCL can use GPUDirect RDMA here (nccl_vm), said, never a failure
    result["gpudirect"] = gpudirect_state(host.fs)
    if hosts is not None:
        result["hosts_path"] = params["hosts_path"]
        result["hosts_lines"] = hosts_lines
    return Decision(conf, hosts, hosts_found, result, topo)


def apply(decision, params, host, run):
    """Write the files of ``decision`` that differ (not in check mode); the result fields."""
    result = dict(decision.result)
    if decision.topo is not None and not decision.topo.remove:
        # the file NCCL_TOPO_FILE names is in place before the setting that names it
        decision.topo.apply(host, run, False)
    backup = decision.conf.apply(host, run, params["backup"])
    if backup is not None:
        result["backup_file"] = backup
    if decision.topo is not None and decision.topo.remove:
        # and removed after the setting that named it
        decision.topo.apply(host, run, False)
    if decision.hosts is not None:
        backup = decision.hosts.apply(host, run, params["backup"])
        if backup is not None:
            result["hosts_backup_file"] = backup
    return result


def plan(decision):
    """A decision reported without writing: what would be written, whether each file would
    change, and the lines the hosts block holds now (``hosts_found``; None for a block in
    another form), so that the controller can compare the lines it decides later."""
    planned = dict((key, decision.result[key]) for key in ("path", "gid_index", "settings", "removed"))
    planned["conf_differs"] = decision.conf.differs
    if decision.result.get("topology") is not None:
        planned["topology"] = decision.result["topology"]
        planned["topo_differs"] = decision.topo is not None and decision.topo.differs
    if decision.hosts is not None:
        planned["hosts_path"] = decision.result["hosts_path"]
        planned["hosts_differs"] = decision.hosts.differs
        planned["hosts_found"] = decision.hosts_found
    return planned


def nccl_env(params, host, run):
    """The nccl_env module: edit the NCCL file (and, with ``hosts_entries``, the hosts file)
    under the host's root. Both files are decided before either is written."""
    decision = decide(params, host)
    if decision.result["gpudirect"]["message"]:
        run.warn(decision.result["gpudirect"]["message"])
    topology = decision.result.get("topology")
    if topology and not topology["written"]:
        # said, never a failure: NCCL then reads the guest's own PCIe tree
        gone = "; the one this module wrote is removed, NCCL_TOPO_FILE with it" if topology["removed"] else ""
        run.warn("no NCCL topology file (%s): %s%s" % (topology["path"], topology["reason"], gone))
        if topology["kept"]:
            run.warn(topology["kept"])
    return apply(decision, params, host, run)
