#!/bin/sh
# PID 1 of the nested tenants' guest (lab/nested-guest.sh puts it at /init of the initramfs). It finds
# the VF the lab host passed through (the netdev whose driver is igbvf), reports what it sees on the
# serial console (one "NESTED ..." line per fact, read by lab/nested.py), puts soft-RoCE on the VF and
# plays its role from /etc/nested/tenants, found by the VF's MAC:
#   server  serves ibv_rc_pingpong again and again on the GID index it found
#   client  pings the server and runs ibv_rc_pingpong against it until both pass (or time runs out)
#   probe   the isolated tenant: ping and ibv_rc_pingpong to the server, each expected to fail
# Busybox only (no Python, no systemd): the guest boots in seconds even under nested TCG.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
/bin/busybox mkdir -p /proc /sys /dev /tmp /run
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s /bin

say() { echo "NESTED $*"; }
stop() { say "end $*"; sync; poweroff -f; sleep 60; }

say "boot kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)"
while read -r module; do
  insmod "/lib/modules/$module" 2>/tmp/insmod.err || say "insmod-failed $module $(cat /tmp/insmod.err)"
done </etc/nested/modules

# The guest's PCI tree, one line per function: its vendor:device, class, the numa_node its root bus
# carries and its sysfs path from the root bus (pci0000:NN/...): lab/nested.py follows a device's
# bridges by these paths and compares them with the domain's controllers (check gpu_switch).
for dev in /sys/bus/pci/devices/*; do
  where=$(readlink -f "$dev"); where=${where#/sys/devices/}
  say "pcidev pci=${dev##*/} id=$(cat "$dev/vendor"):$(cat "$dev/device") class=$(cat "$dev/class")" \
    "numa=$(cat "$dev/numa_node" 2>/dev/null || echo none) path=$where"
done

find_vf() {
  netdev=""
  for tries in $(seq 60); do
    for dev in /sys/class/net/*; do
      driver=$(readlink "$dev/device/driver" 2>/dev/null)
      [ "${driver##*/}" = igbvf ] && netdev=${dev##*/}
    done
    [ -n "$netdev" ] && break
    sleep 1
  done
}
find_vf
[ -n "$netdev" ] || stop "fail=no-igbvf-netdev"
# igbvf asks the PF for the MAC it set over the 82576's mailbox at probe; when the PF's driver
# (in the lab, itself under TCG) does not answer within igbvf's wait, the VF comes up with a random
# MAC ("PF still in reset state"). Reloading the VF driver asks again, as the PF driver's own
# "Reload the VF driver to make this change effective" says.
igbvf=$(grep '/igbvf.ko$' /etc/nested/modules)
for attempt in $(seq 10); do
  grep -qi "^$(cat /sys/class/net/$netdev/address) " /etc/nested/tenants && break
  say "vf-mac-not-from-pf attempt=$attempt mac=$(cat /sys/class/net/$netdev/address) $(dmesg | grep -i -E 'igbvf|PF still' | tail -n 2 | tr '\n' ' ')"
  rmmod igbvf
  sleep 2
  insmod "/lib/modules/$igbvf"
  find_vf
  [ -n "$netdev" ] || stop "fail=no-igbvf-netdev-after-reload"
done
pci=$(readlink "/sys/class/net/$netdev/device"); pci=${pci##*/}
mac=$(cat "/sys/class/net/$netdev/address")
# where the guest sees its VF: the guest NUMA node its root bus carries (the tenant's guest cell, on a
# pcie-expander-bus) and the PCI path from that root bus
numa=$(cat "/sys/bus/pci/devices/$pci/numa_node" 2>/dev/null)
path=$(readlink -f "/sys/bus/pci/devices/$pci"); path=${path#/sys/devices/}
say "vf netdev=$netdev mac=$mac pci=$pci id=$(cat /sys/class/net/$netdev/device/vendor):$(cat /sys/class/net/$netdev/device/device) probes=$attempt numa=${numa:-none} path=$path"

# mac name address role peer: found by the VF's MAC; where the VF did not get the PF's MAC, by the
# tenant name lab/nested.py put on this domain's kernel command line (nested.name=), so that the
# other checks still run and say what they see.
entry=$(grep -i "^$mac " /etc/nested/tenants)
if [ -z "$entry" ]; then
  for word in $(cat /proc/cmdline); do
    case "$word" in nested.name=*) entry=$(grep " ${word#nested.name=} " /etc/nested/tenants) ;; esac
  done
  [ -n "$entry" ] || stop "fail=mac-not-in-table mac=$mac"
  say "identity-by-name (the VF's MAC is not the PF's)"
  ip link set dev "$netdev" address "$(echo "$entry" | cut -d' ' -f1)" 2>/tmp/mac.err ||
    say "set-pf-mac-failed $(head -c 120 /tmp/mac.err | tr '\n' ' ')"
fi
set -- $entry
name=$2 address=$3 role=$4 peer=$5
say "tenant name=$name address=$address role=$role peer=$peer"

# The host set this VF's MAC (and spoof check on): a MAC change from inside must be refused.
if ip link set dev "$netdev" address 02:00:00:00:00:99 2>/tmp/mac.err; then
  say "mac-change accepted now=$(cat /sys/class/net/$netdev/address)"
  ip link set dev "$netdev" address "$mac"
else
  say "mac-change refused now=$(cat /sys/class/net/$netdev/address) error=$(head -c 120 /tmp/mac.err | tr '\n' ' ')"
fi

ip link set lo up
ip link set "$netdev" up
ip addr add "$address" dev "$netdev"
for tries in $(seq 120); do
  [ "$(cat /sys/class/net/$netdev/carrier 2>/dev/null)" = 1 ] && break
  sleep 1
done
say "link carrier=$(cat /sys/class/net/$netdev/carrier 2>/dev/null) operstate=$(cat /sys/class/net/$netdev/operstate)"

rdma link add rxe0 type rxe netdev "$netdev" 2>/tmp/rdma.err ||
  say "rdma-link-add-failed $(head -c 200 /tmp/rdma.err | tr '\n' ' ') $(dmesg | grep -i -E 'rxe|crc' | tail -n 2 | tr '\n' ' ')"
ports=/sys/class/infiniband/rxe0/ports/1
index=""
for tries in $(seq 60); do
  for gid in "$ports"/gids/*; do
    i=${gid##*/}
    type=$(cat "$ports/gid_attrs/types/$i" 2>/dev/null) || continue
    case "$(cat "$gid")" in 0000:0000:0000:0000:0000:ffff:*) [ "$type" = "RoCE v2" ] && index=$i && break ;; esac
  done
  [ -n "$index" ] && break
  sleep 1
done
# The whole table (every slot with a type), for the collection's code to choose from on the lab host.
for gid in "$ports"/gids/*; do
  i=${gid##*/}
  type=$(cat "$ports/gid_attrs/types/$i" 2>/dev/null) || continue
  say "gid index=$i gid=$(cat "$gid") type=$(echo "$type" | tr ' ' '_') ndev=$(cat "$ports/gid_attrs/ndevs/$i" 2>/dev/null)"
done
say "link-layer $(cat $ports/link_layer 2>/dev/null | tr ' ' '_')"
say "verbs $(ibv_devices 2>&1 | awk 'seen {printf "%s ", $1} /^ *---/ {seen=1}')"
[ -n "$index" ] || stop "fail=no-roce-v2-ipv4-gid"
say "gid-index $index"

server=${peer%/*}
case "$role" in
  server)
    say "serving"
    while :; do
      ibv_rc_pingpong -d rxe0 -g "$index" -n 5 >/tmp/pp.out 2>&1
      say "served rc=$? $(tail -n 2 /tmp/pp.out | tr '\n' ' ')"
    done ;;
  client)
    ok_ping=1 ok_rdma=1
    for tries in $(seq 40); do
      [ $ok_ping -ne 0 ] && { ping -c 1 -W 2 "$server" >/dev/null 2>&1; ok_ping=$?; }
      if [ $ok_ping -eq 0 ]; then
        timeout 60 ibv_rc_pingpong -d rxe0 -g "$index" -n 5 "$server" >/tmp/pp.out 2>&1
        ok_rdma=$?
        [ $ok_rdma -eq 0 ] && break
      fi
      sleep 3
    done
    say "ping to=$server rc=$ok_ping"
    say "rdma to=$server rc=$ok_rdma $(tail -n 2 /tmp/pp.out 2>/dev/null | tr '\n' ' ')"
    say "done" ;;
  probe)
    ping -c 5 -W 2 "$server" >/tmp/ping.out 2>&1
    say "ping to=$server rc=$? $(tail -n 2 /tmp/ping.out | tr '\n' ' ')"
    timeout 60 ibv_rc_pingpong -d rxe0 -g "$index" -n 5 "$server" >/tmp/pp.out 2>&1
    say "rdma to=$server rc=$? $(tail -n 2 /tmp/pp.out | tr '\n' ' ')"
    say "done" ;;
esac
# A client or probe stays up (the lab host reads its console and stops it).
while :; do sleep 3600; done
