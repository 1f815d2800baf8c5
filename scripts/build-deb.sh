#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage: scripts/build-deb.sh            (or: make deb)
#
# Builds the Debian package from the source package debian/ with
# dpkg-buildpackage -us -uc -b, as a packager would, in a copy of the
# tree (git's tracked and untracked-but-not-ignored files, as they are in
# the working tree) under bin/deb-src: dpkg-buildpackage writes its
# results into the parent of the tree it builds, and a checkout in /root
# must not leave them in /root. The results land in bin/deb/:
# glove_<version>_<arch>.deb, glove-dbgsym_<version>_<arch>.ddeb and the
# .changes and .buildinfo; the copy is removed.
#
# Go: the build profile pkg.glove.go-on-path (debian/README.source) is
# set unless an installed golang-go is as new as go.mod's go line, so the
# Go on PATH builds it and every other build dependency is still
# checked. debian/rules refuses, in one line, a Go older than go.mod's.
#
# Environment: VERSION (default: debian/changelog's) replaces the
# version of the copy's top changelog entry; GO (default go).
set -euo pipefail

cd "$(dirname "$0")/.."
repo="$(pwd)"
prog=build-deb
die() { echo "$prog: $*" >&2; exit 1; }

command -v dpkg-buildpackage >/dev/null || die "dpkg-buildpackage not found (apt-get install dpkg-dev debhelper)"
GO="${GO:-go}"
gopath="$(command -v "$GO")" || die "$GO not found on PATH"

src="$repo/bin/deb-src"
out="$repo/bin/deb"
tree="$src/glove"
rm -rf "$src"
mkdir -p "$tree" "$out"

# The tree as it is in the working tree, bin/ and other ignored build
# output left out (a deleted file that git still tracks is skipped).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$tree"
else
  tar --exclude=./bin --exclude=./.git --exclude=./.tools --exclude=./.demo -cf - . | tar -xf - -C "$tree"
fi

if [ -n "${VERSION:-}" ]; then
  case "$VERSION" in [0-9]*) ;; *) die "VERSION must start with a digit: $VERSION" ;; esac
  sed -i "1s/^glove ([^)]*)/glove ($VERSION)/" "$tree/debian/changelog"
fi

want="$(awk '$1 == "go" { print $2; exit }' go.mod)"
have="$(dpkg-query -W -f='${Version}' golang-go 2>/dev/null || true)"
profiles="${DEB_BUILD_PROFILES:-}"
if [ -z "$have" ] || ! dpkg --compare-versions "$have" ge "2:$want~"; then
  profiles="${profiles:+$profiles }pkg.glove.go-on-path"
  why="is not installed"
  [ -z "$have" ] || why="$have is older than go.mod's go $want"
  echo "$prog: golang-go $why: building with DEB_BUILD_PROFILES=pkg.glove.go-on-path and $gopath"
fi

# The results of an earlier build go first: the VM lane installs
# bin/deb/glove_*.deb and must find exactly this one.
rm -f "$out"/glove_* "$out"/glove-dbgsym_*
(cd "$tree" && DEB_BUILD_PROFILES="$profiles" GO="$GO" dpkg-buildpackage -us -uc -b)
shopt -s nullglob
results=("$src"/glove_*.deb "$src"/glove-dbgsym_*.deb "$src"/glove-dbgsym_*.ddeb "$src"/glove_*.changes "$src"/glove_*.buildinfo)
[ ${#results[@]} -gt 0 ] || die "dpkg-buildpackage left no package in $src"
mv "${results[@]}" "$out/"
rm -rf "$src"
for f in "${results[@]}"; do echo "$prog: built $out/${f##*/}"; done
