#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage: scripts/install-deps.sh [build|host|test]
#
# Installs what Glove needs for one purpose, only when it is missing, so
# running it twice changes nothing and, when everything is present, it
# only tests for a few files (no apt-get, no network):
#
#   build  what `make build` needs: Go, a C compiler, libc's and
#          libseccomp's headers and static archives (glove and glove-shim
#          are built with cgo, glove-shim linked statically), pkg-config.
#   host   build, and what scripts/setup-host.sh, an installed Glove and
#          `make demo` use: setcap and getcap, mke2fs, useradd and
#          usermod, python3 (the demo reads JSON with it).
#   test   (the default: `make deps`, `make lint`, `make test`) host, and
#          what the tests and benchmarks compare with or call (bwrap,
#          crun, runc, ip), what the package tests use (`make deb`'s
#          dpkg-buildpackage and debhelper, lintian, man, groff for the
#          man pages, rpmbuild and rpmlint), and staticcheck for
#          `make lint`.
#
# Debian packages come from apt-get, as root. Not root and something
# missing: one line naming the packages, exit 1. staticcheck comes from
# the Go module proxy at a pinned version into .tools/bin (never onto the
# system PATH).
set -euo pipefail

cd "$(dirname "$0")/.."
prog=install-deps
mode="${1:-test}"
case "$mode" in build | host | test) ;; *) echo "usage: $0 [build|host|test]" >&2; exit 2 ;; esac
GO="${GO:-go}"
declare -A purpose=([build]="make build" [host]="scripts/setup-host.sh" [test]="make test")

# Go is not installed from apt: Debian 12's golang is older than go.mod's
# go line.
if ! command -v "$GO" >/dev/null; then
  echo "$prog: $GO not found on PATH: install Go $(awk '$1 == "go" { print $2; exit }' go.mod) or later (https://go.dev/dl/) and put it on PATH" >&2
  exit 1
fi

# package -> a file it installs, to test for presence without dpkg races
# (and without asking dpkg at all, so that a complete host pays nothing).
declare -A want=(
  [libseccomp-dev]=/usr/include/seccomp.h # seccomp.h, libseccomp.a, libseccomp.pc
  [libc6-dev]=/usr/include/stdio.h        # and libc.a for the static glove-shim
  [gcc]=/usr/bin/gcc
  [pkgconf]=/usr/bin/pkg-config # Debian 12's pkg-config
  [make]=/usr/bin/make
)
if [ "$mode" != build ]; then
  want+=(
    [libcap2-bin]=/usr/sbin/setcap
    [e2fsprogs]=/usr/sbin/mke2fs
    [passwd]=/usr/sbin/useradd
    [python3-minimal]=/usr/bin/python3 # the demo's JSON; the cgroup tests' memory hog and busy loop
  )
fi
if [ "$mode" = test ]; then
  want+=(
    [iproute2]=/usr/sbin/ip
    [bubblewrap]=/usr/bin/bwrap
    [crun]=/usr/bin/crun
    [runc]=/usr/sbin/runc
    [socat]=/usr/bin/socat     # the egress relay's benchmark anchor
    [jq]=/usr/bin/jq           # docs/harnesses.md makes its plans with jq; its test runs them
    [ncurses-bin]=/usr/bin/tput # and sizes the terminal with tput
    [groff-base]=/usr/bin/groff # lints docs/man's pages (packaging's TestManPagesExist)
    [rpm]=/usr/bin/rpmbuild    # packaging's RPM test builds packaging/rpm/glove.spec
    [rpmlint]=/usr/bin/rpmlint # and lints the RPM
    # The package tests (packaging/deb_test.go, lintian_test.go): make
    # deb is dpkg-buildpackage on debian/, whose Build-Depends beyond
    # build's are debhelper and bash-completion (dh_bash-completion);
    # lintian judges the result; man opens the installed pages.
    [dpkg-dev]=/usr/bin/dpkg-buildpackage
    [debhelper]=/usr/bin/dh
    [bash-completion]=/usr/bin/dh_bash-completion
    [dh-apparmor]=/usr/bin/dh_apparmor # loads glove-shim's AppArmor profiles in postinst
    [lintian]=/usr/bin/lintian
    [man-db]=/usr/bin/man
  )
fi
missing=()
for pkg in "${!want[@]}"; do
  [ -e "${want[$pkg]}" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort)
  if [ "$(id -u)" -ne 0 ]; then
    echo "$prog: ${purpose[$mode]} needs ${missing[*]}: run it as root, or apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "$prog: apt-get install ${missing[*]} (for ${purpose[$mode]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi

[ "$mode" = test ] || exit 0
STATICCHECK_VERSION=v0.8.2
if ! [ -x .tools/bin/staticcheck ] || ! .tools/bin/staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  echo "$prog: staticcheck ${STATICCHECK_VERSION}"
  GOBIN="$PWD/.tools/bin" GOFLAGS=-mod=mod "$GO" install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
fi
