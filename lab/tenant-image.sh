#!/usr/bin/env bash
# Builds the tenant bench's guest image: a Debian 12 cloud image made the way Debian's cloud
# images are (debootstrap, cloud-init reading a NoCloud seed, netplan rendering to
# systemd-networkd, the standard kernel, which has rdma_rxe), with the RDMA userspace a tenant's
# guest stage uses (rdma-core, the verbs providers and utilities), OpenSSH and Python 3.
# It boots with UEFI (OVMF) from a GPT disk: an EFI system partition holding a GRUB EFI binary
# at the removable-media path, and one ext4 root. No user, no key, no password: cloud-init makes
# them from the seed, as on any cloud image.
#
# usage: tenant-image.sh OUT_DIR
# Writes OUT_DIR/disk.qcow2 and OUT_DIR/build.log. Needs root, debootstrap, sfdisk, losetup,
# partx, mkfs.ext4, mkfs.vfat (dosfstools), mtools, grub-mkimage (grub-efi-amd64-bin),
# qemu-img and access to Debian's mirror (GPUVIRT_LAB_MIRROR).
#
# Facts this relies on (docs/lab.md, "The tenant bench"): the machines that run the bench may
# have no vfat in their kernel, so the ESP is written with mtools into a file, never mounted, and
# GRUB is made with grub-mkimage rather than grub-install; `ibverbs-providers` is only a
# Recommends of libibverbs1, and without it verbs see no device while `rdma link` shows the rxe
# one; cloud-init's locale step errs without a locale such as C.UTF-8 set.
set -euo pipefail

OUT="${1:?usage: tenant-image.sh OUT_DIR}"
MIRROR="${GPUVIRT_LAB_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
SIZE="${GPUVIRT_TENANT_DISK_SIZE:-4G}"
ESP_MB=64
PACKAGES=(
  systemd-sysv udev dbus kmod procps sudo iproute2 iputils-ping ca-certificates
  openssh-server python3 cloud-init netplan.io
  linux-image-amd64 initramfs-tools
  rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
)

die() { echo "tenant image: $*" >&2; exit 2; }
# shellcheck source=lab/image-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/image-lib.sh"

image_need "Debian: apt-get install debootstrap fdisk e2fsprogs dosfstools mtools grub-efi-amd64-bin qemu-utils, or run scripts/bootstrap.sh" \
  debootstrap sfdisk losetup partx mkfs.ext4 mkfs.vfat mcopy mmd blkid qemu-img chroot mount umount grub-mkimage
[[ -d /usr/lib/grub/x86_64-efi ]] || die "no GRUB EFI modules in /usr/lib/grub/x86_64-efi: apt-get install grub-efi-amd64-bin"

image_work "$OUT"
ESP="$WORK/esp.img"

echo "tenant image: partitioning a $SIZE GPT disk (ESP ${ESP_MB} MiB, ext4 root)"
truncate -s "$SIZE" "$RAW"
sfdisk -q "$RAW" <<SFDISK
label: gpt
start=2048, size=$((ESP_MB * 2048)), type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp
start=$((2048 + ESP_MB * 2048)), type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=root
SFDISK
image_loop 2
mkfs.ext4 -q -L tenant-root "$PART"
UUID="$(blkid -s UUID -o value "$PART")"
mkdir -p "$MNT"
mount "$PART" "$MNT"

echo "tenant image: debootstrap $SUITE from $MIRROR (minbase)"
image_debootstrap "$SUITE" "$MIRROR"
echo "UUID=$UUID / ext4 errors=remount-ro 0 1" >"$MNT/etc/fstab"

echo "tenant image: installing ${#PACKAGES[@]} packages"
image_apt_install "${PACKAGES[@]}"

echo "tenant image: configuring the system"
echo 'LANG=C.UTF-8' >"$MNT/etc/default/locale"
: >"$MNT/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$MNT/etc/hosts"
# The seed is the only data source a tenant has: ds-identify looks for nothing else.
mkdir -p "$MNT/etc/cloud/cloud.cfg.d"
printf 'datasource_list: [NoCloud, None]\n' >"$MNT/etc/cloud/cloud.cfg.d/90-gpuvirt-datasource.cfg"
chroot "$MNT" systemctl enable systemd-networkd.service >>"$LOG" 2>&1
# Offline tenants: no unit waits for a network that has no uplink, no apt timers.
chroot "$MNT" systemctl disable systemd-networkd-wait-online.service >>"$LOG" 2>&1 || true
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer; do
  chroot "$MNT" systemctl mask "$unit" >>"$LOG" 2>&1 || true
done
chroot "$MNT" passwd -l root >/dev/null
: >"$MNT/etc/machine-id"
rm -f "$MNT/var/lib/dbus/machine-id" "$MNT"/etc/ssh/ssh_host_*
KERNEL="$(cd "$MNT/boot" && ls vmlinuz-* | sort -V | tail -n 1)"
INITRD="initrd.img-${KERNEL#vmlinuz-}"
[[ -f "$MNT/boot/$INITRD" ]] || die "no $INITRD next to $KERNEL in the image"

echo "tenant image: GRUB EFI on the ESP (grub-mkimage, mtools)"
# The embedded config finds the root by its UUID and boots the kernel from it.
cat >"$WORK/grub.cfg" <<CFG
search --no-floppy --fs-uuid --set=root $UUID
set timeout=0
linux /boot/$KERNEL root=UUID=$UUID ro console=ttyS0,115200n8 mitigations=off
initrd /boot/$INITRD
boot
CFG
grub-mkimage -O x86_64-efi -p /EFI/BOOT -c "$WORK/grub.cfg" -o "$WORK/BOOTX64.EFI" \
  part_gpt fat ext2 search search_fs_uuid normal linux echo all_video efi_gop serial terminal >>"$LOG" 2>&1 ||
  die "grub-mkimage failed (see $LOG)"
mkfs.vfat -C -n ESP "$ESP" $((ESP_MB * 1024)) >>"$LOG" 2>&1
mmd -i "$ESP" ::/EFI ::/EFI/BOOT
mcopy -i "$ESP" "$WORK/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI

echo "tenant image: writing qcow2"
image_detach
dd if="$ESP" of="$RAW" bs=1M seek=1 conv=notrunc status=none
image_qcow2 "$OUT"
echo "tenant image: done: $OUT/disk.qcow2 ($KERNEL)"
