#!/usr/bin/env bash
# Builds the lab's Debian 12 disk image: debootstrap from Debian's mirror into a
# partitioned raw disk (MBR, one ext4 root), GRUB (BIOS) as boot loader with
# "console=ttyS0,115200n8 intel_iommu=off" as the bare host's kernel args,
# systemd-networkd DHCP on the management NIC, root SSH login by a key made here.
#
# usage: build-image.sh OUT_DIR
# Writes OUT_DIR/disk.qcow2, OUT_DIR/id_ed25519{,.pub}. Needs root, debootstrap,
# sfdisk, losetup, partx, mkfs.ext4, qemu-img, ssh-keygen and network access to
# the mirror (GPUVIRT_LAB_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail

OUT="${1:?usage: build-image.sh OUT_DIR}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MIRROR="${GPUVIRT_LAB_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
SIZE="${GPUVIRT_LAB_DISK_SIZE:-8G}"

die() { echo "lab build: $*" >&2; exit 2; }
# shellcheck source=lab/image-lib.sh
source "$HERE/image-lib.sh"

image_need "Debian: apt-get install debootstrap fdisk util-linux e2fsprogs qemu-utils openssh-client, or run scripts/bootstrap.sh" \
  debootstrap sfdisk losetup partx mkfs.ext4 blkid qemu-img ssh-keygen chroot mount umount

mapfile -t PACKAGES < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/packages.txt")

image_work "$OUT"

echo "lab build: partitioning a $SIZE disk"
truncate -s "$SIZE" "$RAW"
echo 'label: dos
start=2048, type=83, bootable' | sfdisk -q "$RAW"
image_loop 1
mkfs.ext4 -q -L lab-root "$PART"
UUID="$(blkid -s UUID -o value "$PART")"
mkdir -p "$MNT"
mount "$PART" "$MNT"

echo "lab build: debootstrap $SUITE from $MIRROR (minbase)"
image_debootstrap "$SUITE" "$MIRROR"
# The boot loader goes to the disk seen as /dev/vda in the lab.
echo "grub-pc grub-pc/install_devices multiselect /dev/vda" | chroot "$MNT" debconf-set-selections
echo "UUID=$UUID / ext4 errors=remount-ro 0 1" >"$MNT/etc/fstab"
mkdir -p "$MNT/etc/default"
cat >"$MNT/etc/default/grub" <<'GRUB'
# Lab host boot loader settings. GRUB_CMDLINE_LINUX starts as a bare host:
# the IOMMU off until the collection turns it on.
GRUB_DEFAULT=0
GRUB_TIMEOUT=1
GRUB_DISTRIBUTOR=Debian
# Lab only: no Spectre/Meltdown mitigations (page-table isolation costs a full TLB flush on
# every syscall under TCG); no_timer_check, as emulated timers on a loaded machine fail the
# IO-APIC timer check once interrupt remapping is on (a panic at boot); panic=10 reboots
# instead of hanging. Under TCG a boot of the lab kernel sometimes hangs (a vCPU that gets no
# more timer interrupts, docs/lab.md): panic_on_rcu_stall (at the 2nd stall report) and
# hung_task_panic (a task blocked for 120 s, as when RCU stops without a stall report) turn
# that hang into a panic, and panic=10 resets the VM: the boot starts again instead of never
# ending. GRUB_CMDLINE_LINUX below is the collection's.
GRUB_CMDLINE_LINUX_DEFAULT="mitigations=off no_timer_check panic=10 hung_task_panic=1 sysctl.kernel.panic_on_rcu_stall=1 sysctl.kernel.max_rcu_stall_to_panic=2"
GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 intel_iommu=off"
GRUB_TERMINAL="serial console"
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_OS_PROBER=true
GRUB

echo "lab build: installing ${#PACKAGES[@]} packages"
image_apt_install "${PACKAGES[@]}"
# The image's first initramfs holds most drivers (built here, it cannot know the VM's
# hardware); later rebuilds inside the lab (kernel args, early vfio-pci) take only the
# modules the lab needs, which under TCG is minutes faster.
sed -i 's/^MODULES=.*/MODULES=dep/' "$MNT/etc/initramfs-tools/initramfs.conf"
grep -q '^MODULES=dep' "$MNT/etc/initramfs-tools/initramfs.conf" || die "could not set MODULES=dep for initramfs-tools"

echo "lab build: configuring the system"
echo lab >"$MNT/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 lab\n::1 localhost ip6-localhost ip6-loopback\n' >"$MNT/etc/hosts"
# DHCP on the management NIC only (e1000e on pcie.0 slot 5); the node-1 NIC is left
# unconfigured for the RDMA stage.
mkdir -p "$MNT/etc/systemd/network"
cat >"$MNT/etc/systemd/network/10-mgmt.network" <<'NET'
[Match]
Path=pci-0000:00:05.0

[Network]
DHCP=ipv4
NET
echo "nameserver 10.0.2.3" >"$MNT/etc/resolv.conf"
chroot "$MNT" systemctl enable systemd-networkd.service >/dev/null 2>&1
chroot "$MNT" systemctl disable systemd-networkd-wait-online.service >/dev/null 2>&1 || true
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer; do
  chroot "$MNT" systemctl mask "$unit" >/dev/null 2>&1 || true
done
# Root logs in by key only; the key is made here and kept next to the image.
rm -f "$OUT/id_ed25519" "$OUT/id_ed25519.pub"
ssh-keygen -q -t ed25519 -N '' -C gpuvirt-lab -f "$OUT/id_ed25519"
install -d -m 700 "$MNT/root/.ssh"
install -m 600 "$OUT/id_ed25519.pub" "$MNT/root/.ssh/authorized_keys"
mkdir -p "$MNT/etc/ssh/sshd_config.d"
printf 'PermitRootLogin prohibit-password\nUseDNS no\nPasswordAuthentication no\n' >"$MNT/etc/ssh/sshd_config.d/lab.conf"
chroot "$MNT" passwd -l root >/dev/null
: >"$MNT/etc/machine-id"
rm -f "$MNT/var/lib/dbus/machine-id"

echo "lab build: installing GRUB"
chroot "$MNT" grub-install --target=i386-pc --modules="part_msdos ext2" "$LOOP" >>"$LOG" 2>&1 || { tail -n 40 "$LOG" >&2; die "grub-install failed"; }
chroot "$MNT" update-grub >>"$LOG" 2>&1 || { tail -n 40 "$LOG" >&2; die "update-grub failed"; }
# update-grub in a chroot names the loop partition; the lab boots from UUID.
sed -i -E "s#root=/dev/loop[0-9]+p1#root=UUID=$UUID#g" "$MNT/boot/grub/grub.cfg"
grep -q "root=UUID=$UUID" "$MNT/boot/grub/grub.cfg" || die "grub.cfg has no root=UUID=$UUID"
grep -q 'intel_iommu=off' "$MNT/boot/grub/grub.cfg" || die "grub.cfg lacks intel_iommu=off"

echo "lab build: writing qcow2"
image_detach
image_qcow2 "$OUT"
echo "lab build: done: $OUT/disk.qcow2"
