#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage: scripts/build-deb.sh            (or: make deb)
#
# Builds bin/deb/glove_<version>_<arch>.deb with dpkg-deb alone: the
# executables built by `make build` with PREFIX=/usr and CONFDIR=/etc/glove
# into bin/deb-build (bin/ is left alone), staged with the modes of the
# capability table (helpers/captable, through packaging/cmd/glove-deb),
# the postinst generated from that table, the preinst, prerm and postrm,
# the sysusers.d, tmpfiles.d and systemd files and the example helper
# configuration from packaging/.
# Every file in the archive is root:root (dpkg-deb --root-owner-group);
# postinst gives the helpers their group and file capabilities
# (docs/packaging.md). Needs no root and no network beyond `make build`'s.
#
# Environment: VERSION (default 0.0~gitYYYYMMDD.<commit>), GO (default go).
set -euo pipefail

cd "$(dirname "$0")/.."
repo="$(pwd)"
GO="${GO:-go}"
prog=build-deb
die() { echo "$prog: $*" >&2; exit 1; }

command -v dpkg-deb >/dev/null || die "dpkg-deb not found (apt-get install dpkg)"
arch="$(dpkg --print-architecture)"
if [ -z "${VERSION:-}" ]; then
  commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  date="$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date -u +%Y%m%d)"
  VERSION="0.0~git$date.$commit"
fi
case "$VERSION" in [0-9]*) ;; *) die "VERSION must start with a digit: $VERSION" ;; esac

build="$repo/bin/deb-build"
out="$repo/bin/deb"
root="$out/glove-root"
deb="$out/glove_${VERSION}_${arch}.deb"

echo "$prog: make build PREFIX=/usr CONFDIR=/etc/glove BINDIR=bin/deb-build"
make -s build PREFIX=/usr CONFDIR=/etc/glove BINDIR="$build" GO="$GO"

rm -rf "$root"
mkdir -p "$root/DEBIAN" "$out"
chmod 0755 "$root" "$root/DEBIAN"
umask 022

gen() { "$GO" run ./packaging/cmd/glove-deb "$@"; }

# Executables, modes from the capability table.
gen stage -bindir "$build" -root "$root" -prefix /usr

# System integration and example configuration.
install -D -m 0644 packaging/sysusers.d/glove.conf "$root/usr/lib/sysusers.d/glove.conf"
install -D -m 0644 packaging/tmpfiles.d/glove.conf "$root/usr/lib/tmpfiles.d/glove.conf"
install -D -m 0644 packaging/systemd/gloved.service "$root/lib/systemd/system/gloved.service"
install -d -m 0755 "$root/etc/glove"
: >"$root/DEBIAN/conffiles"
for f in packaging/etc/glove/*.json; do
  install -m 0644 "$f" "$root/etc/glove/"
  echo "/etc/glove/$(basename "$f")" >>"$root/DEBIAN/conffiles"
done
install -D -m 0644 packaging/debian/copyright "$root/usr/share/doc/glove/copyright"
install -m 0644 docs/packaging.md "$root/usr/share/doc/glove/packaging.md"

# Maintainer scripts; postinst's helper lines from the capability table.
# preinst refuses to unpack over setup-host's bounds in /etc/glove.
gen postinst -template packaging/debian/postinst.in -prefix /usr >"$root/DEBIAN/postinst"
chmod 0755 "$root/DEBIAN/postinst"
for s in preinst prerm postrm; do
  install -m 0755 "packaging/debian/$s" "$root/DEBIAN/$s"
done
for s in preinst postinst prerm postrm; do
  sh -n "$root/DEBIAN/$s"
done

size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s/@VERSION@/$VERSION/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
  packaging/debian/control.in >"$root/DEBIAN/control"

# Nothing in the package may be setuid or setgid.
if find "$root" -perm /6000 | grep -q .; then
  die "setuid or setgid file in the package: $(find "$root" -perm /6000)"
fi

rm -f "$out"/glove_*.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
rm -rf "$root"
echo "$prog: built $deb"
