#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage: vmlane/build-image.sh SUITE MIRROR OUTDIR KERNEL.deb...
#
# Builds one VM lane root image into OUTDIR (which must be empty):
#   root.img  raw ext4, the whole root file system, booted as /dev/nvme0n1
#   vmlinuz   the kernel of the unpacked kernel packages, for qemu -kernel
#   info      kernel=RELEASE and systemd=VERSION, for the driver's report
# The userspace is mmdebstrap's minbase of SUITE plus vmlane/packages; the
# kernel packages are unpacked into it rather than installed, so that a
# kernel of another suite fits and no initramfs is built (qemu boots the
# kernel directly; the root's NVMe and ext4 drivers are built in, checked
# below). Called by vmlane/run.sh, which caches OUTDIR: this file's content
# is part of the cache key, so any change here rebuilds every image.
set -euo pipefail

prog=vmlane
die() { echo "$prog: build-image: $*" >&2; exit 1; }

[ $# -ge 4 ] || die "usage: build-image.sh SUITE MIRROR OUTDIR KERNEL.deb..."
suite=$1 mirror=$2 out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
root_size=4G   # sparse; the agent installs glove and makes loop images in it

[ -d "$out" ] && [ -z "$(ls -A "$out")" ] || die "$out: not an empty directory"
root="$out/root"

pkgs=$(grep -v '^\s*\(#\|$\)' "$here/packages" | paste -sd, -)
# The cell's own packages (vmlane/cells, packages=; run.sh passes them and
# keys the cached image on them).
if [ -n "${VMLANE_EXTRA_PACKAGES:-}" ]; then
  pkgs="$pkgs,$VMLANE_EXTRA_PACKAGES"
fi

# mmdebstrap's root mode bind-mounts /dev, /proc and /sys into the root
# while it works. A private mount namespace makes those mounts vanish with
# it even if mmdebstrap is killed, so nothing is left mounted under $root
# (and removing $root can never reach the host's /dev).
echo "$prog: mmdebstrap $suite"
unshare --mount --propagation private \
  mmdebstrap --quiet --mode=root --variant=minbase --format=directory \
    --include="$pkgs" \
    --aptopt='Acquire::Languages "none"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$suite" "$root" "$mirror"

# The kernel. dpkg-deb -x would replace the merged-/usr symlinks (/lib ->
# usr/lib) with directories; tar --keep-directory-symlink follows them.
for deb in "$@"; do
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" --keep-directory-symlink
done
releases=$(ls "$root/usr/lib/modules")
[ "$(echo "$releases" | wc -l)" -eq 1 ] || die "expected one kernel in /usr/lib/modules, found: $releases"
kver=$releases
kdir="$root/usr/lib/modules/$kver"
if [ -f "$root/boot/vmlinuz-$kver" ]; then   # bookworm, trixie
  vmlinuz="$root/boot/vmlinuz-$kver" config="$root/boot/config-$kver"
else                                         # sid's split linux-binary-*
  vmlinuz="$kdir/vmlinuz" config="$kdir/config"
fi
[ -f "$vmlinuz" ] && [ -f "$config" ] || die "kernel $kver: no vmlinuz or config"
# Booted without an initramfs: the root disk's driver, ext4 and the serial
# console must be built in, not modules.
for opt in CONFIG_BLK_DEV_NVME CONFIG_EXT4_FS CONFIG_SERIAL_8250_CONSOLE; do
  grep -qx "$opt=y" "$config" || die "kernel $kver: $opt is not built in (=y)"
done
# dpkg -i would have run depmod in postinst: the guest's modprobe (loop is
# a module) needs modules.dep, written by the guest's own kmod.
chroot "$root" depmod -a "$kver"
# The lane's disk is virtio-blk (vmlane/run.sh), loaded from the root by udev.
for mod in loop virtio_blk virtio_pci; do
  grep -q "/$mod\.ko" "$kdir/modules.dep" "$kdir/modules.builtin" || die "kernel $kver: no $mod module"
done
cp "$vmlinuz" "$out/vmlinuz"

# The guest side: the lane's disk at /lane, the unit that runs the agent.
echo glove-lane > "$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tglove-lane\n' > "$root/etc/hosts"
cat > "$root/etc/fstab" <<'EOF'
# vmlane: the root is the only NVMe disk; the lane's disk is virtio, found by label.
/dev/nvme0n1      /      ext4  rw,errors=remount-ro  0 0
LABEL=glove-lane  /lane  ext4  rw,nodev,nosuid       0 0
EOF
mkdir -p "$root/lane" "$root/usr/local/libexec"
install -m 0755 "$here/image/glove-lane-run" "$root/usr/local/libexec/glove-lane-run"
install -m 0644 "$here/image/glove-lane.service" "$root/etc/systemd/system/glove-lane.service"
ln -sf /etc/systemd/system/glove-lane.service "$root/etc/systemd/system/multi-user.target.wants/glove-lane.service"
for unit in emergency rescue; do
  mkdir -p "$root/etc/systemd/system/$unit.service.d"
  install -m 0644 "$here/image/no-console.conf" "$root/etc/systemd/system/$unit.service.d/vmlane.conf"
done
# Nobody logs in; the serial console carries only boot messages and the
# agent's output. No first-boot prompts (they would wait on the console);
# apt's timers would only take dpkg's lock from under the agent.
for unit in serial-getty@ttyS0.service systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
rm -f "$root/etc/systemd/system/timers.target.wants/apt-daily"*.timer
# One fixed machine id: every run's boots look like later boots of one host.
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$root/etc/machine-id"
echo >> "$root/etc/machine-id"

systemd=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f '${Version}' systemd)
printf 'kernel=%s\nsystemd=%s\n' "$kver" "$systemd" > "$out/info"

# Few inodes (the root holds ~15k files) keep the inode tables small, and
# writing them now (lazy_itable_init=0) spares the guest the background
# zeroing that would otherwise fill every run's overlay.
echo "$prog: mkfs.ext4 root.img ($root_size, kernel $kver, systemd $systemd)"
truncate -s "$root_size" "$out/root.img"
mkfs.ext4 -q -F -L glove-root -i 65536 -E lazy_itable_init=0,lazy_journal_init=0 -d "$root" "$out/root.img"
rm -rf --one-file-system "$root"
