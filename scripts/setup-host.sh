#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage (as root, from anywhere):
#
#   scripts/setup-host.sh USER
#   PREFIX=/opt/glove CONFDIR=/etc/glove scripts/setup-host.sh USER
#
# The one host set-up that lets USER, an existing unprivileged account,
# run `glove run` and `gloved` with no privilege. It installs the
# dependencies (scripts/install-deps.sh host), builds and installs Glove
# (file capabilities on the helpers), creates the service group "glove"
# and adds USER to it, writes the helpers' root-owned bounds files into
# CONFDIR (never overwriting one) with the marker CONFDIR/.setup-host,
# creates USER's image directory, delegates the cgroup parent /glove-USER
# in every mounted cgroup hierarchy to USER, and checks that USER can
# reach every installed executable and bounds file.
#
# Environment: PREFIX (default /usr/local) and CONFDIR (default
# /etc/glove; compiled into the helpers, so the same value must be used
# every time). Idempotent: a second run changes nothing and exits 0.
# Cgroup directories do not survive a reboot: run it again after boot.
#
# The glove Debian package owns /etc/glove and /usr: while it is known to
# dpkg, setup-host refuses CONFDIR=/etc/glove and PREFIX=/usr; and the
# package's preinst refuses to install over an /etc/glove that holds
# setup-host's marker (docs/packaging.md).
set -euo pipefail

prog=setup-host
die() { echo "$prog: $*" >&2; exit 1; }
say() { echo "$prog: $*"; }

[ $# -eq 1 ] || { echo "usage: $0 USER   (env: PREFIX=/usr/local CONFDIR=/etc/glove)" >&2; exit 2; }
user="$1"
[ "$(id -u)" -eq 0 ] || die "must run as root (it installs file capabilities and writes root-owned bounds)"
getent passwd "$user" >/dev/null || die "no such user: $user (create the account first, e.g. useradd --system $user)"
uid="$(id -u "$user")"
gid="$(id -g "$user")"
[ "$uid" -ne 0 ] || die "refusing $user: uid 0; the service user must be unprivileged"

PREFIX="${PREFIX:-/usr/local}"
CONFDIR="${CONFDIR:-/etc/glove}"
GROUP=glove
case "$PREFIX" in /*) ;; *) die "PREFIX must be absolute: $PREFIX" ;; esac
case "$CONFDIR" in /*) ;; *) die "CONFDIR must be absolute: $CONFDIR" ;; esac
case "$user" in */* | .* | "") die "refusing user name $user" ;; esac

# The package's files are dpkg's: bounds written into its /etc/glove
# would stop the next dpkg run at a conffile prompt (or be replaced by
# it), and an install into /usr would change files dpkg tracks. Any state
# but not-installed counts: "config-files" still has its conffiles here.
if command -v dpkg-query >/dev/null; then
  pkg_state="$(dpkg-query -W -f='${db:Status-Status}' glove 2>/dev/null || true)"
  if [ -n "$pkg_state" ] && [ "$pkg_state" != not-installed ]; then
    [ "$(realpath -m -- "$CONFDIR")" != /etc/glove ] ||
      die "the glove package is $pkg_state and owns /etc/glove: use another CONFDIR (e.g. CONFDIR=/etc/glove-$user), or dpkg --purge glove first"
    [ "$(realpath -m -- "$PREFIX")" != /usr ] ||
      die "the glove package is $pkg_state and owns /usr: use another PREFIX (e.g. PREFIX=/opt/glove), or dpkg --purge glove first"
  fi
fi

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"

changed=0
note() { changed=1; say "$*"; }

# mkdir_root DIR: DIR and each missing parent, root-owned 0755 whatever
# the umask.
mkdir_root() {
  local d="$1"
  [ -d "$d" ] && return
  mkdir_root "$(dirname "$d")"
  mkdir "$d"
  chown root:root "$d"
  chmod 0755 "$d"
  note "created $d (root:root 0755)"
}

# check_trusted_dir DIR: DIR and every ancestor are directories owned by
# root and not writable by group or others, no symbolic link (what the
# helpers check of their configuration directory).
check_trusted_dir() {
  local d="$1"
  while :; do
    [ ! -L "$d" ] || die "$d is a symbolic link; the helpers refuse it (choose another CONFDIR)"
    local st
    st="$(stat -c '%u %a' "$d")"
    local owner="${st% *}" mode="${st#* }"
    [ "$owner" -eq 0 ] || die "$d is owned by uid $owner, not root; the helpers refuse it"
    (( (8#$mode & 8#022) == 0 )) || die "$d has mode $mode (group/other-writable); the helpers refuse it"
    [ "$d" = / ] && break
    d="$(dirname "$d")"
  done
}

# (a) dependencies: what the build, the install and the helpers use
# (not the tests' runtimes nor staticcheck).
say "dependencies: scripts/install-deps.sh host"
scripts/install-deps.sh host

# The kernel ignores file capabilities on a file system mounted nosuid
# (as it ignores setuid bits): the helpers would install fine and then
# start without their capabilities.
mnt_of="$PREFIX"
while [ ! -e "$mnt_of" ]; do mnt_of="$(dirname "$mnt_of")"; done
case ",$(findmnt -n -o VFS-OPTIONS -T "$mnt_of")," in
  *,nosuid,*) die "$PREFIX is on a file system mounted nosuid ($(findmnt -n -o TARGET -T "$mnt_of")), where file capabilities do not apply: choose another PREFIX" ;;
esac

# (b) build and install. `make install` runs only when the installed
# files differ from the build (content, owner, group, mode or file
# capabilities), so a second run leaves them untouched.
command -v go >/dev/null || die "go is not on PATH (root's PATH); install Go first"
say "build: make build PREFIX=$PREFIX CONFDIR=$CONFDIR"
make -s build PREFIX="$PREFIX" CONFDIR="$CONFDIR"

# install_current: every captable row is installed, identical to bin/,
# with the table's mode, group and file capabilities.
install_current() {
  getent group "$GROUP" >/dev/null || return 1
  local bin dir mode want_owner bounds caps dst got
  # glove captable --fields: binary dir mode owner:group bounds caps
  while read -r bin dir mode want_owner bounds caps; do
    dst="$PREFIX/$dir/$bin"
    [ -f "$dst" ] && [ ! -L "$dst" ] || return 1
    cmp -s "bin/$bin" "$dst" || return 1
    got="$(stat -c '0%a %U:%G' "$dst")"
    [ "$got" = "$mode $want_owner" ] || return 1
    got="$(/usr/sbin/getcap "$dst" | awk '{print $2}')"
    if [ "$caps" = none ]; then [ -z "$got" ] || return 1; else [ "$got" = "$caps" ] || return 1; fi
  done < <(bin/glove captable --fields)
  return 0
}
if install_current; then
  say "install: $PREFIX is current (same files, modes, group and file capabilities); kept"
else
  say "install: make install PREFIX=$PREFIX CONFDIR=$CONFDIR"
  make -s install PREFIX="$PREFIX" CONFDIR="$CONFDIR"
  install_current || die "install: $PREFIX still differs from the build after make install"
  changed=1
fi

# (c) the service group and USER's membership.
if getent group "$GROUP" >/dev/null; then
  say "group: $GROUP exists"
else
  scripts/create-group.sh "$GROUP"
  changed=1
fi
if id -nG "$user" | tr ' ' '\n' | grep -qx "$GROUP"; then
  say "group: $user is already a member of $GROUP"
else
  usermod -aG "$GROUP" "$user"
  note "group: added $user to $GROUP (new logins of $user get it)"
fi

# (d) bounds files, the mounter's extra source root and USER's images.
sources=/srv/glove/sources
images_parent=/var/lib/glove/images
images="$images_parent/$user"
cgparent="/glove-$user"

mkdir_root "$CONFDIR"
check_trusted_dir "$CONFDIR"
mkdir_root "$sources"
mkdir_root "$images_parent"
if [ ! -d "$images" ]; then
  mkdir "$images"
  note "created $images"
fi
[ ! -L "$images" ] || die "$images is a symbolic link; refusing"
if [ "$(stat -c '%u:%g %a' "$images")" != "$uid:$gid 700" ]; then
  chown "$uid:$gid" "$images"
  chmod 0700 "$images"
  note "set $images to $user 0700 (glove-loopext4's materialization root)"
fi

# The marker says that CONFDIR's bounds are setup-host's. The glove
# package's preinst refuses to install while /etc/glove/.setup-host
# exists: dpkg would otherwise stop at a conffile prompt for each of
# these files and leave the package half-configured. It is written
# before the first bounds file, and also when an existing file is
# exactly what setup-host writes (one written before the marker existed).
marker="$CONFDIR/.setup-host"
mark_confdir() {
  if [ -e "$marker" ] || [ -L "$marker" ]; then return; fi
  local tmp
  tmp="$(mktemp "$CONFDIR/.setup-host.new-XXXXXX")"
  printf '%s\n' "The bounds in this directory were written by Glove's scripts/setup-host.sh (for $user), not by the glove package." \
    "The package will not install over them: move this directory aside first (docs/packaging.md)." >"$tmp"
  chown root:root "$tmp"
  chmod 0644 "$tmp"
  mv -T "$tmp" "$marker"
  note "bounds: wrote $marker (these bounds are setup-host's, not the glove package's)"
}

# write_bounds FILE JSON: root-owned 0644, only if FILE is absent.
write_bounds() {
  local f="$CONFDIR/$1"
  if [ -e "$f" ] || [ -L "$f" ]; then
    if [ -f "$f" ] && [ ! -L "$f" ] && cmp -s "$f" <(printf '%s\n' "$2"); then
      mark_confdir
      say "bounds: kept existing $f (as setup-host writes it)"
    else
      say "bounds: kept existing $f; it differs from what setup-host writes now ($2): move it aside and run setup-host again to get those"
    fi
    return
  fi
  mark_confdir
  local tmp
  tmp="$(mktemp "$CONFDIR/.$1.new-XXXXXX")"
  printf '%s\n' "$2" >"$tmp"
  chown root:root "$tmp"
  chmod 0644 "$tmp"
  mv -T "$tmp" "$f"
  note "bounds: wrote $f"
}
# The bounds admit every profile Glove ships (small, medium, harness:
# docs/policy.md), glove-shim's 32 extra tasks counted, and the tmpfs
# inode bound is max_tmpfs_bytes / 16 KiB, the ratio the supervisor asks
# for (docs/sessions.md); packaging's TestShippedProfilesFitShippedBounds
# reads these lines.
write_bounds mounter.json \
  '{"schema_version":1,"source_roots":["/etc","/srv/glove/sources","/usr"],"max_tmpfs_bytes":8589934592,"max_tmpfs_inodes":524288}'
write_bounds loopext4.json \
  "{\"schema_version\":1,\"materialization_root\":\"$images\",\"max_image_bytes\":4294967296}"
write_bounds cgroup.json \
  "{\"schema_version\":1,\"parent\":\"$cgparent\",\"max_memory_bytes\":4294967296,\"max_pids\":2048}"
write_bounds streamproxy.json \
  '{"schema_version":1,"max_frame_bytes":16384,"max_exchange_ms":30000}'
# glove-userns off: only a host that refuses unprivileged user namespaces
# needs it, and its operator turns it on (docs/running.md, "Hosts that
# refuse unprivileged user namespaces").
write_bounds userns.json \
  '{"schema_version":1,"enabled":false}'

# (e) the cgroup parent in every mounted hierarchy (v1 and v2), delegated
# to USER: the directory and the files that moving processes and
# creating children need (v1: cgroup.procs, tasks; v2: cgroup.procs,
# cgroup.subtree_control, cgroup.threads), as testenv does.
mounts="$(awk '{ for (i = 1; i <= NF; i++) if ($i == "-") break;
                 if (($(i+1) == "cgroup" || $(i+1) == "cgroup2") && $4 == "/") print $5 }' /proc/self/mountinfo)"
[ -n "$mounts" ] || die "no cgroup hierarchy is mounted"
# On cgroup v2 also the leaf $cgparent/supervisor, where a supervisor
# lives (gloved and glove run move themselves there; start them there):
# once glove-cgroup has enabled memory and pids in $cgparent, cgroup v2
# refuses processes in $cgparent itself (no internal processes).
while IFS= read -r m; do
  dirs=("$m$cgparent")
  [ ! -e "$m/cgroup.subtree_control" ] || dirs+=("$m$cgparent/supervisor")
  for d in "${dirs[@]}"; do
    if [ ! -d "$d" ]; then
      mkdir "$d"
      note "cgroup: created $d"
    fi
    for f in . cgroup.procs tasks cgroup.subtree_control cgroup.threads; do
      p="$d/$f"
      [ -e "$p" ] || continue
      if [ "$(stat -c '%u:%g' "$p")" != "$uid:$gid" ]; then
        chown "$uid:$gid" "$p"
        note "cgroup: delegated ${p%/.} to $user"
      fi
    done
  done
done <<<"$mounts"
say "cgroup: $cgparent (and its leaf supervisor on v2) delegated to $user in: $(tr '\n' ' ' <<<"$mounts")"

# (f) what USER will open, opened as USER: every installed executable
# (the helpers through the group) and every bounds file. A PREFIX or
# CONFDIR below a directory USER cannot search (a clone in /root, mode
# 0700) would otherwise only show later, as "permission denied" from
# fork/exec in `glove run`.
as_user_test() { setpriv --reuid="$uid" --regid="$gid" --init-groups -- test "$@"; }
# blocker DIR: the first directory on DIR's way from / that USER cannot
# search, or nothing.
blocker() {
  local d="" part parts
  as_user_test -x / || { echo /; return; }
  IFS=/ read -ra parts <<<"${1#/}"
  for part in "${parts[@]}"; do
    [ -n "$part" ] || continue
    d="$d/$part"
    as_user_test -x "$d" || { echo "$d"; return; }
  done
}
# reachable -x|-r PATH: USER may execute (read) PATH, or a one-line error.
reachable() {
  local b
  as_user_test "$1" "$2" && return
  b="$(blocker "$(dirname "$2")")"
  [ -z "$b" ] || die "$user cannot reach $2: $b is $(stat -c '%U:%G %a' "$b"), not searchable by $user; choose a PREFIX and CONFDIR outside it (e.g. PREFIX=/opt/glove)"
  die "$user cannot open $2 ($(stat -c '%U:%G %a' "$2")): give it back the mode and group make install or setup-host gave it"
}
while read -r bin dir _ _ bounds _; do
  reachable -x "$PREFIX/$dir/$bin"
  [ "$bounds" = - ] || reachable -r "$CONFDIR/$bounds"
done < <(bin/glove captable --fields)
say "reach: $user can execute every installed executable and read every bounds file"

# (g) summary.
if [ "$changed" -eq 0 ]; then
  say "nothing to change: the host was already set up for $user"
else
  say "done: $user can run Glove without privilege"
fi
cat <<EOF
$prog: installed in $PREFIX (helpers in $PREFIX/libexec/glove), bounds in $CONFDIR,
$prog: images in $images, cgroup parent $cgparent. Try, as $user (in a new login, for the group):
  $PREFIX/bin/glove status
  $PREFIX/bin/glove helpers
EOF
