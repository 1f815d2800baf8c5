#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make demo: Glove end to end on a fresh Debian machine, as root.
#
# It installs what it needs and builds (scripts/setup-host.sh), installs
# into its own prefix /opt/glove-demo (file capabilities on the helpers)
# with its own bounds in /etc/glove-demo (compiled into its build as
# CONFDIR), creates the service user glove-demo and its delegated cgroup,
# then, as that user and with no privilege:
#   1. glove status: what this host enforces;
#   2. a program's output from inside the sandbox;
#   3. a fork bomb contained by the pids limit (the host's process count
#      is measured before and during);
#   4. a write outside the workspace refused, and the workspace copy
#      ephemeral (the host's workspace is unchanged);
#   5. a managed session from a policy and a plan (a native-skill
#      runtime: a private home with the skill of a verified library
#      bundle, the bundle read-only), whose authenticated receipt is
#      written and verified.
# Everything it creates in /tmp is removed at the end. What stays (run it
# again: it is idempotent): the user glove-demo in the group glove,
# /opt/glove-demo, /etc/glove-demo, /var/lib/glove/images/glove-demo,
# /srv/glove/sources and, until a reboot, the cgroups /glove-glove-demo.
#
# Why /opt/glove-demo and /etc/glove-demo: the demo user must reach the
# install, so it cannot live in the clone (a clone in /root, mode 0700,
# is not searchable by anyone else); /opt/<package> is the FHS place for
# a self-contained add-on tree, root-owned and world-searchable, on the
# root file system (file capabilities apply; setup-host refuses a nosuid
# one). /etc/glove-demo is made root:root 0755 under /etc, as the helpers
# require of CONFDIR and every ancestor (setup-host checks the chain).
# Neither is a path of the glove Debian package (/usr, /etc/glove)
# nor setup-host's default (/usr/local), so the demo never changes an
# installed Glove and `dpkg -i` of the package never meets the demo's
# files (docs/packaging.md). Both can be changed with DEMO_PREFIX and
# DEMO_CONFDIR.
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (make demo)" >&2; exit 1; }

DEMO_USER="${DEMO_USER:-glove-demo}"
# Not PREFIX and CONFDIR: those may be set for a real install (make
# passes its command line's to the environment) and the demo's must
# stay apart from it.
PREFIX="${DEMO_PREFIX:-/opt/glove-demo}"
CONFDIR="${DEMO_CONFDIR:-/etc/glove-demo}"
case "$(realpath -m -- "$CONFDIR")" in
  /etc/glove) echo "demo: DEMO_CONFDIR=$CONFDIR is the glove package's /etc/glove; use the demo's own (unset DEMO_CONFDIR)" >&2; exit 1 ;;
esac
case "$(realpath -m -- "$PREFIX")" in
  /usr | /usr/local) echo "demo: DEMO_PREFIX=$PREFIX is the package's or setup-host's default prefix; use the demo's own (unset DEMO_PREFIX)" >&2; exit 1 ;;
esac
GLOVE="$PREFIX/bin/glove"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if ! getent passwd "$DEMO_USER" >/dev/null; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$DEMO_USER"
fi
# The prefix: root-owned and searchable by the demo user (setup-host
# checks the whole way to every executable as that user).
[ -d "$PREFIX" ] || install -d -o root -g root -m 0755 "$PREFIX"
step "set-up (PREFIX=$PREFIX CONFDIR=$CONFDIR scripts/setup-host.sh $DEMO_USER)"
PREFIX="$PREFIX" CONFDIR="$CONFDIR" scripts/setup-host.sh "$DEMO_USER" | sed 's/^/  /'
# An earlier demo (before it had its own CONFDIR) wrote /etc/glove, which
# the glove package's dpkg -i would stop at; the demo leaves it alone but
# says so.
if [ -f /etc/glove/cgroup.json ] && [ ! -e /etc/glove/.setup-host ] &&
  grep -q "\"parent\":\"/glove-$DEMO_USER\"" /etc/glove/cgroup.json; then
  echo "demo: note: /etc/glove holds the bounds of an earlier make demo, no longer used; remove it (rm -r /etc/glove) before installing the glove package"
fi

uid="$(id -u "$DEMO_USER")"
gid="$(id -g "$DEMO_USER")"
v2="$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)"
[ -n "$v2" ] || { echo "demo: no cgroup v2 hierarchy" >&2; exit 1; }
parent="$v2/glove-$DEMO_USER"

work="$(mktemp -d /tmp/glove-demo.XXXXXX)"
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
mkdir "$work/workspace"
echo "a file of the host's workspace" > "$work/workspace/README"
chown -R "$DEMO_USER:$DEMO_USER" "$work/workspace"

# as_user CMD...: run CMD as the demo user, from inside its delegated
# cgroup subtree (a supervisor must live there to place its sessions:
# in its leaf supervisor, since a cgroup v2 parent whose memory and pids
# are enabled takes no process of its own), with the user's groups
# (glove: it may execute the helpers).
# as_user_exec replaces the (sub)shell it runs in, so that `as_user_exec
# CMD &` gives CMD's own pid in $!.
as_user_exec() {
  echo "$BASHPID" > "$parent/supervisor/cgroup.procs"
  cd "$work/workspace"
  exec setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env -- "$@"
}
as_user() { ( as_user_exec "$@" ); }

step "1. glove status"
as_user "$GLOVE" status || true

step "2. output from inside the sandbox"
as_user "$GLOVE" run -- sh -c 'echo "hello from $(hostname), uid $(id -u), in $(pwd)"; cat README; ls /'

step "3. a fork bomb, contained by the pids limit (64) and stopped by the wall-time limit (3 s)"
before="$(ls /proc | grep -c '^[0-9]')"
( as_user "$GLOVE" run --limit pids=64 --limit wall_time_ms=3000 -- sh -c 'b() { b | b & }; b; sleep 10' \
    > "$work/bomb.log" 2>&1 || true ) &
sleep 1.5
during="$(ls /proc | grep -c '^[0-9]')"
wait
after="$(ls /proc | grep -c '^[0-9]')"
echo "fork failures inside the sandbox: $(grep -c 'fork' "$work/bomb.log" || true)"
grep 'session ended' "$work/bomb.log" || { echo "demo: the bomb was not ended by a limit" >&2; cat "$work/bomb.log" >&2; exit 1; }
echo "host processes: before $before, during the bomb $during (the session may hold 64 + 32 for glove-shim), after $after"

step "4. writes outside the workspace are refused; the workspace copy is ephemeral"
as_user "$GLOVE" run -- sh -c 'echo x > /usr/pwned 2>/dev/null && echo WROTE-USR || echo "write to /usr: refused";
  echo x > /etc/pwned 2>/dev/null && echo WROTE-ETC || echo "write to /etc: refused";
  echo "written inside" > /workspace/new-file && echo "write to /workspace: ok (a copy)"'
if [ -e "$work/workspace/new-file" ] || [ -e /usr/pwned ] || [ -e /etc/pwned ]; then
  echo "demo: a sandbox write reached the host" >&2; exit 1
fi
echo "host workspace unchanged: $(ls "$work/workspace")"

step "5. a managed session through gloved's control socket, and its verified receipt"
go run ./scripts/demopolicy "$work"
for d in run store mat; do mkdir -m 0700 "$work/$d"; done
chown "$DEMO_USER:$DEMO_USER" "$work/policy.json" "$work/plan.json" "$work/key" "$work/run" "$work/store" "$work/mat"
chown -R "$DEMO_USER:$DEMO_USER" "$work/bundles"
anchor="$(printf 'a%.0s' $(seq 64))"
sock="$work/run/gloved.sock"
as_user_exec "$PREFIX/bin/gloved" --session-policy "$work/policy.json" --session-store "$work/store" \
  --materialization-root "$work/mat" --runtime-dir "$work/run" --receipt-key "$work/key" \
  --receipt-anchor "$anchor" --library-bundle-root "$work/bundles" > "$work/gloved.out" 2> "$work/gloved.log" &
gloved_pid=$!
trap 'kill -TERM "$gloved_pid" 2>/dev/null || true; wait "$gloved_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
call() { as_user "$GLOVE" call --socket "$sock" "$@"; }
echo "capabilities: $(call capabilities | tr -d ' \n')"
plan_json="$(cat "$work/plan.json")"
digest="$(printf 'c%.0s' $(seq 64))"
token="$(call create_session "{\"session_id\":\"demo-1\",\"idempotency_key\":\"demo-key-1\",\"controller_plan_digest\":\"$digest\",\"plan\":$plan_json}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["start_token"])')"
call start_session "{\"session_id\":\"demo-1\",\"start_token\":\"$token\"}" > /dev/null
echo "-- the session's output (attach):"
status=0
call attach '{"session_id":"demo-1"}' || status=$?
echo "-- the session exited with status $status"
call session_status '{"session_id":"demo-1"}' | python3 -c 'import json,sys; s=json.load(sys.stdin); print("state:", s["state"], " termination:", s.get("termination"), " exit code:", s.get("exit_code"))'
call receipts_page '{"after":0,"limit":100}' | python3 -c 'import json,sys; json.dump(json.load(sys.stdin)["envelopes"], sys.stdout, indent=2); print()' > "$work/receipts.json"
chown "$DEMO_USER:$DEMO_USER" "$work/receipts.json"
chmod 0600 "$work/receipts.json"
echo "-- the terminal receipt (HMAC, chained to the anchor):"
sed 's/^/  /' "$work/receipts.json"
as_user "$GLOVE" receipt verify --key "$work/key" --anchor "$anchor" "$work/receipts.json"
kill -TERM "$gloved_pid"
wait "$gloved_pid"
echo "gloved stopped; the host's workspace is unchanged: $(ls "$work/workspace")"
