#!/usr/bin/env bash
# Installs what building and testing Glove needs, only when it is missing,
# so running it twice changes nothing. Debian packages come from apt-get;
# staticcheck comes from the Go module proxy at a pinned version into
# .tools/bin (never onto the system PATH).
set -euo pipefail

cd "$(dirname "$0")/.."

# package -> a file it installs, to test for presence without dpkg races.
declare -A want=(
  [libseccomp-dev]=/usr/include/seccomp.h
  [libcap2-bin]=/usr/sbin/setcap
  [e2fsprogs]=/usr/sbin/mke2fs
  [iproute2]=/usr/sbin/ip
  [bubblewrap]=/usr/bin/bwrap
  [crun]=/usr/bin/crun
  [runc]=/usr/sbin/runc
  [passwd]=/usr/sbin/useradd
  [make]=/usr/bin/make
  [python3-minimal]=/usr/bin/python3   # the cgroup tests' memory hog and busy loop
)
missing=()
for pkg in "${!want[@]}"; do
  [ -e "${want[$pkg]}" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${missing[*]}; run as root (or apt-get install them)" >&2
    exit 1
  fi
  echo "install-deps: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

STATICCHECK_VERSION=v0.8.2
if ! [ -x .tools/bin/staticcheck ] || ! .tools/bin/staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  echo "install-deps: staticcheck ${STATICCHECK_VERSION}"
  GOBIN="$PWD/.tools/bin" GOFLAGS=-mod=mod go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
fi
