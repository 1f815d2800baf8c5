#!/usr/bin/env bash
# make demo: Glove end to end on a fresh Debian machine, as root.
#
# It installs what it needs and builds (scripts/setup-host.sh), installs
# into a local prefix (.demo/prefix, file capabilities on the helpers),
# creates the service user glove-demo and its delegated cgroup, then, as
# that user and with no privilege:
#   1. glove status: what this host enforces;
#   2. a program's output from inside the sandbox;
#   3. a fork bomb contained by the pids limit (the host's process count
#      is measured before and during);
#   4. a write outside the workspace refused, and the workspace copy
#      ephemeral (the host's workspace is unchanged);
#   5. a managed session from a policy and a plan, whose authenticated
#      receipt is written and verified.
# Everything it creates in /tmp is removed at the end; the user, the
# install and the bounds files stay (run it again: it is idempotent).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (make demo)" >&2; exit 1; }

DEMO_USER="${DEMO_USER:-glove-demo}"
export PREFIX="${PREFIX:-$repo/.demo/prefix}"
export CONFDIR="${CONFDIR:-/etc/glove}"
GLOVE="$PREFIX/bin/glove"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

if ! getent passwd "$DEMO_USER" >/dev/null; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$DEMO_USER"
fi
# The prefix must be reachable by the demo user.
mkdir -p "$PREFIX"
chmod 0755 "$repo/.demo" "$PREFIX"
step "set-up (scripts/setup-host.sh $DEMO_USER, PREFIX=$PREFIX)"
scripts/setup-host.sh "$DEMO_USER" | sed 's/^/  /'

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
# cgroup subtree (a supervisor must live there to place its sessions),
# with the user's groups (glove: it may execute the helpers).
as_user() {
  ( echo "$BASHPID" > "$parent/cgroup.procs"
    cd "$work/workspace"
    exec setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env -- "$@" )
}

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

step "5. a managed session from a policy and a plan, with its authenticated receipt"
go run ./scripts/demopolicy "$work"
mkdir "$work/out"
chown "$DEMO_USER:$DEMO_USER" "$work/policy.json" "$work/plan.json" "$work/key" "$work/out"
as_user "$GLOVE" run --policy "$work/policy.json" --plan "$work/plan.json" \
  --receipt "$work/out/receipt.json" --receipt-key "$work/key" || true
echo "receipt:"
sed 's/^/  /' "$work/out/receipt.json"
as_user "$GLOVE" receipt verify --key "$work/key" "$work/out/receipt.json"
