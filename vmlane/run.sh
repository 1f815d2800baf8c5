#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage: vmlane/run.sh --deb PATH --agent PATH [--tests DIR] [--cells a,b,c]
#                      [--timeout-per-cell SECONDS] [--out DIR] [--jobs N]
#
# The VM lane (vmlane/README.md): for each cell of vmlane/cells, boots a
# Debian guest under qemu (TCG: nested KVM hangs on our machines) from a
# cached root image and runs the in-guest agent there through
# glove-lane.service, with the lane's disk at /lane holding glove.deb, the
# agent, the cell's name and its kernel. Prints one line per cell and exits
# non-zero if any cell failed. As root; installs its own apt dependencies.
#
# Environment: VMLANE_CACHE (default /var/cache/glove-vmlane), VMLANE_MIRROR
# (default http://deb.debian.org/debian), VMLANE_MEM (MiB, default 2048),
# VMLANE_SMP (default 2), VMLANE_BOOT_TIMEOUT (seconds to the agent's first
# start before the boot is retried once, default 180), VMLANE_APPEND (more
# kernel command line).
set -euo pipefail

prog=vmlane
die() { echo "$prog: $*" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

deb='' agent='' tests='' cells='' timeout=600 out="$repo/bin/vmlane" jobs=1
while [ $# -gt 0 ]; do
  case $1 in
    --deb|--agent|--tests|--cells|--timeout-per-cell|--out|--jobs)
      [ $# -ge 2 ] || die "$1 needs a value"
      case $1 in
        --deb) deb=$2 ;; --agent) agent=$2 ;; --tests) tests=$2 ;; --cells) cells=$2 ;;
        --timeout-per-cell) timeout=$2 ;; --out) out=$2 ;; --jobs) jobs=$2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,3p' "$0" | sed 's/^# //'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$deb" ] && [ -n "$agent" ] || die "--deb and --agent are required (see --help)"
[ -f "$deb" ] || die "--deb $deb: no such file"
[ -f "$agent" ] || die "--agent $agent: no such file"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || die "--timeout-per-cell $timeout: not a number of seconds"
[[ $jobs =~ ^[1-9]$ ]] || die "--jobs $jobs: not 1-9"
[[ ${VMLANE_BOOT_TIMEOUT:-1} =~ ^[1-9][0-9]*$ ]] || die "VMLANE_BOOT_TIMEOUT $VMLANE_BOOT_TIMEOUT: not a number of seconds"
[ "$(id -u)" -eq 0 ] || die "run as root (it builds root images and boots them)"
[ -z "$tests" ] || [ -d "$tests" ] || die "--tests $tests: no such directory"
deb=$(realpath "$deb") agent=$(realpath "$agent")
[ -z "$tests" ] || tests=$(realpath "$tests")
mkdir -p "$out"
out=$(realpath "$out")

cache=${VMLANE_CACHE:-/var/cache/glove-vmlane}
mirror=${VMLANE_MIRROR:-http://deb.debian.org/debian}
mem=${VMLANE_MEM:-2048} smp=${VMLANE_SMP:-2}
boot_timeout=${VMLANE_BOOT_TIMEOUT:-180}

# The matrix: name, userspace suite, kernel suite (vmlane/cells), then
# options: packages=a,b (more packages in the cell's image), append=x,y
# (more kernel command line, one word each).
declare -A cell_suite cell_ksuite cell_packages cell_append
all_cells=()
while read -r name suite ksuite rest; do
  case $name in ''|'#'*) continue ;; esac
  [ -n "$ksuite" ] || die "vmlane/cells: bad line: $name $suite $ksuite $rest"
  cell_suite[$name]=$suite cell_ksuite[$name]=$ksuite cell_packages[$name]='' cell_append[$name]=''
  for opt in $rest; do
    case $opt in
      packages=?*) cell_packages[$name]=${opt#packages=} ;;
      append=?*) cell_append[$name]=${opt#append=} ;;
      *) die "vmlane/cells: $name: unknown option $opt" ;;
    esac
  done
  all_cells+=("$name")
done < "$here/cells"
if [ -n "$cells" ]; then
  IFS=, read -r -a run_cells <<< "$cells"
  for c in "${run_cells[@]}"; do
    [ -n "${cell_suite[$c]:-}" ] || die "--cells: no cell $c in vmlane/cells (${all_cells[*]})"
  done
else
  run_cells=("${all_cells[@]}")
fi

# A cell that vmlane/tests gives tests of its own (cell=CELL) needs them
# in the --tests directory (make lane-tests leaves them out when
# VMLANE_CELLS does not name the cell): without them the cell would pass
# without running them.
if [ -n "$tests" ]; then
  for c in "${run_cells[@]}"; do
    if grep -v '^[[:space:]]*#' "$here/tests" | grep -qE "[[:space:]]cell=$c([[:space:]]|\$)" &&
       [ ! -d "$tests/cells/$c" ]; then
      die "--tests $tests has no cells/$c, but vmlane/tests has tests for cell $c (make lane-tests VMLANE_CELLS=... left it out?)"
    fi
  done
fi

# Dependencies: package -> a file it installs (as scripts/install-deps.sh).
declare -A want=(
  [qemu-system-x86]=/usr/bin/qemu-system-x86_64
  [qemu-utils]=/usr/bin/qemu-img
  [mmdebstrap]=/usr/bin/mmdebstrap
  [e2fsprogs]=/usr/sbin/debugfs
  [debian-archive-keyring]=/usr/share/keyrings/debian-archive-keyring.gpg
)
missing=()
for pkg in "${!want[@]}"; do
  [ -e "${want[$pkg]}" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$prog: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "$prog: apt-get update failed; trying the install anyway" >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# One run at a time per machine: runs share the cache and the two cores.
mkdir -p "$cache/images" "$cache/apt"
exec 9> "$cache/lock"
if ! flock -n 9; then
  echo "$prog: waiting for another run to release $cache/lock"
  flock 9
fi
# With the lock held, anything a killed run left behind is stale.
rm -rf --one-file-system "$cache/images/".new-* "$cache"/run.*

tmp=$(mktemp -d "$cache/run.XXXXXX")
cell_pids=()
cleanup() {
  local rc=$? pid f
  trap - EXIT INT TERM
  for pid in "${cell_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for f in "$tmp"/*/qemu.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill "$pid" 2>/dev/null; then
      for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$pid" 2>/dev/null || break; sleep 0.3; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  wait 2>/dev/null || true
  rm -rf --one-file-system "$tmp" "$cache/images/".new-*
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }   # ms -> "12.3"

# apt for one suite with a state of its own: kernels of other suites are
# resolved and fetched without touching the host's apt (or its pinning).
suite_apt() {
  local cmd=$1 suite=$2 d="$cache/apt/$2"
  shift 2
  "$cmd" -q -o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache" \
    -o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
    -o Dir::State::status="$d/status" -o APT::Architecture=amd64 -o APT::Architectures=amd64 \
    -o Acquire::Languages=none "$@"
}
declare -A apt_updated
apt_update() {
  local suite=$1 d="$cache/apt/$1"
  [ -n "${apt_updated[$suite]:-}" ] && return 0
  mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
  touch "$d/status"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" > "$d/sources.list"
  suite_apt apt-get "$suite" update -qq >/dev/null || return 1
  apt_updated[$suite]=1
}

# The kernel packages of a suite, "name=version" a line: the image package
# linux-image-cloud-amd64 depends on, and the parts sid splits it into
# (linux-binary-, linux-modules-, linux-base-<release>).
kernel_pkgs() {
  local suite=$1 img rel p
  img=$(suite_apt apt-cache "$suite" depends linux-image-cloud-amd64 |
        awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }')
  [ -n "$img" ] || return 1
  rel=${img#linux-image-}
  for p in "$img" $(suite_apt apt-cache "$suite" depends "$img" |
      awk -v rel="-$rel" '$1 == "Depends:" && substr($2, length($2) - length(rel) + 1) == rel { print $2 }'); do
    echo "$p=$(suite_apt apt-cache "$suite" show --no-all-versions "$p" | awk '$1 == "Version:" { print $2; exit }')"
  done | sort -u
}

# Makes $cache/images/CELL current; prints progress, and on failure leaves
# the reason in $tmp/CELL/image-error. The key covers what goes into the
# image: suites, kernel package versions, the package list, the build
# script and the guest files in vmlane/image.
ensure_image() {
  local cell=$1 suite=${cell_suite[$1]} ksuite=${cell_ksuite[$1]}
  local dir="$cache/images/$1" kpkgs key new t0 dl
  t0=$(now_ms)
  if ! apt_update "$ksuite" || ! kpkgs=$(kernel_pkgs "$ksuite"); then
    if [ -f "$dir/key" ]; then
      echo "$prog: $cell: cannot resolve $ksuite's kernel (network?); using the cached image $(cat "$dir/key")"
      return 0
    fi
    echo "cannot resolve $ksuite's linux-image-cloud-amd64 (apt-get update failed?)" > "$tmp/$cell/image-error"
    return 1
  fi
  key=$( { printf 'suite=%s\nkernel-suite=%s\n%s\npackages=%s\n' "$suite" "$ksuite" "$kpkgs" "${cell_packages[$cell]}"
           cat "$here/packages" "$here/build-image.sh" "$here"/image/*; } | sha256sum | cut -c1-16)
  if [ -f "$dir/key" ] && [ "$(cat "$dir/key")" = "$key" ] && [ -f "$dir/root.img" ] && [ -f "$dir/vmlinuz" ]; then
    echo "$prog: $cell: cached image $key ($(grep ^kernel= "$dir/info" | cut -d= -f2), checked in $(secs $(($(now_ms) - t0))) s)"
    return 0
  fi
  echo "$prog: $cell: building image $key ($suite, ${kpkgs//$'\n'/ } from $ksuite)"
  new=$(mktemp -d "$cache/images/.new-$cell.XXXXXX")
  dl=$(mktemp -d "$tmp/debs.XXXXXX")
  # $tmp is private to root: apt cannot drop to its _apt user to write there.
  # shellcheck disable=SC2086
  (cd "$dl" && suite_apt apt-get "$ksuite" download -qq -o APT::Sandbox::User=root $kpkgs >/dev/null) || {
    echo "apt-get download ${kpkgs//$'\n'/ } from $ksuite failed" > "$tmp/$cell/image-error"; return 1; }
  mkdir "$new/out"
  VMLANE_EXTRA_PACKAGES=${cell_packages[$cell]} \
    "$here/build-image.sh" "$suite" "$mirror" "$new/out" "$dl"/*.deb > "$new/build.log" 2>&1 || {
    mkdir -p "$out/$cell"
    cp "$new/build.log" "$out/$cell/build.log"
    { echo "vmlane/build-image.sh failed; its last 40 lines ($out/$cell/build.log):"
      tail -n 40 "$new/build.log"; } > "$tmp/$cell/image-error"
    return 1; }
  rm -rf "$dl"
  echo "$key" > "$new/out/key"
  echo "build_seconds=$(secs $(($(now_ms) - t0)))" >> "$new/out/info"
  # Only the current image per cell is kept.
  rm -rf --one-file-system "$dir"
  mv "$new/out" "$dir"
  mv "$new/build.log" "$dir/build.log"
  rm -rf "$new"
  echo "$prog: $cell: built image $key in $(secs $(($(now_ms) - t0))) s"
}

# One boot of a cell, for run_cell (whose locals it sets: reason, rc, seen,
# boot_at; the attempt started at ta). Ends when qemu does, at the cell's
# timeout (per attempt), at a kernel panic,
# or when the agent has not started $boot_timeout s after qemu did.
boot_once() {
  local tb qpid elapsed n
  reason='' rc=0 seen=0 boot_at=()
  # The lane's disk: the agent's inputs in, its results out. Sparse; the
  # size leaves room for whatever the agent keeps there.
  # 1 GiB beyond the inputs (the real harnesses alone are 717 MB).
  rm -f "$d/lane.img" "$d/root.qcow2"
  truncate -s $(($(du -sm "$d/lane" | cut -f1) + 1024))M "$d/lane.img"
  mkfs.ext4 -q -F -L glove-lane -d "$d/lane" "$d/lane.img"
  # Every run writes to its own overlay: the cached image is never changed,
  # and the guest's changes survive its own reboots within the run.
  qemu-img create -q -f qcow2 -F raw -b "$img/root.img" "$d/root.qcow2"
  # The root is the only NVMe namespace, so always nvme0n1 (the cloud
  # kernels build NVMe in but virtio-blk is a module, and with no initramfs
  # root= can only name a device; two namespaces may come up in either
  # order). The lane is a virtio disk: its module loads from the root, and
  # fstab mounts it by label. No -no-reboot: the guest's reboots reset the
  # same machine; its poweroff ends qemu.
  # tb-size: after a guest reboot TCG still holds the code it translated
  # for the previous boot, and stores to the pages that held it take a slow
  # path (the kernel spent its time in clear_page): the second boot took
  # 10-80 s longer than the first. With a 256 MiB translation cache
  # (default 1 GiB), which fills and is flushed sooner, it does not.
  # -erms: the kernel's "rep stosb" is slow under TCG (about 8 s less per
  # placeholder cell without it). Measurements in vmlane/README.md.
  qemu-system-x86_64 -no-user-config -nodefaults -machine q35 \
    -accel tcg,tb-size=256 -cpu max,-erms \
    -m "$mem" -smp "$smp" -display none -nic none -serial "file:$d/serial.log" \
    -kernel "$img/vmlinuz" \
    -append "root=/dev/nvme0n1 rootwait rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 ${cell_append[$cell]//,/ } ${VMLANE_APPEND:-}" \
    -drive "if=none,id=root,file=$d/root.qcow2,format=qcow2,cache=unsafe" \
    -drive "if=none,id=lane,file=$d/lane.img,format=raw" \
    -device nvme,drive=root,serial=glove-root \
    -device virtio-blk-pci,drive=lane,serial=glove-lane \
    > "$d/qemu.out" 2>&1 &
  qpid=$!
  echo "$qpid" > "$d/qemu.pid"
  tb=$(now_ms)
  echo "$prog: $cell: booting (kernel $kver, systemd $systemd)"
  while kill -0 "$qpid" 2>/dev/null; do
    elapsed=$(($(now_ms) - tb))
    n=$(grep -c 'glove-lane: boot [0-9]*: agent starting' "$d/serial.log" 2>/dev/null || true)
    while [ "$seen" -lt "${n:-0}" ]; do
      seen=$((seen + 1)) boot_at+=("$(secs "$elapsed")")
      echo "$prog: $cell: boot $seen: agent started at $(secs "$elapsed") s"
    done
    if grep -q 'Kernel panic - not syncing' "$d/serial.log" 2>/dev/null; then
      reason="kernel panic"
    elif [ $(($(now_ms) - ta)) -ge $((timeout * 1000)) ]; then
      reason="timeout after $timeout s"
    elif [ "$seen" -eq 0 ] && [ "$elapsed" -ge $((boot_timeout * 1000)) ]; then
      reason="no agent"
    fi
    if [ -n "$reason" ]; then
      kill "$qpid" 2>/dev/null || true
      sleep 1
      kill -KILL "$qpid" 2>/dev/null || true
      break
    fi
    sleep 0.5
  done
  wait "$qpid" || rc=$?
  rm -f "$d/qemu.pid"
}

# Whether the last boot in serial log $1 panicked before its kernel ran
# init: the panic follows that boot's "Linux version" banner with no "Run
# ... as init process" between them.
panic_before_init() {
  awk '/Linux version /{init=0} / as init process/{init=1}
       /Kernel panic - not syncing/{found=1; exit}
       END{exit !(found && !init)}' "$1"
}

# Boots one cell and leaves $tmp/CELL/summary: the report line and, for a
# failed cell, its details indented below it.
run_cell() {
  local cell=$1 img="$cache/images/$1" d="$tmp/$1" o="$out/$1"
  local t0 ta elapsed reason rc seen kver systemd verdict details attempt retried
  local -a boot_at
  t0=$(now_ms)
  mkdir -p "$d/lane"
  kver=$(grep ^kernel= "$img/info" | cut -d= -f2)
  systemd=$(grep ^systemd= "$img/info" | cut -d= -f2)
  install -m 0644 "$deb" "$d/lane/glove.deb"
  install -m 0755 "$agent" "$d/lane/glove-lane-guest"
  # Test binaries built on the host (make lane-tests: NAME.test, NAME.run
  # and prebuilt/), run by the agent's kernel-tests check on this cell's
  # kernel.
  # cells/CELL/ (vmlane/tests lines with cell=CELL, and what they carry,
  # such as the real harnesses' binaries) is laid over the rest in this
  # cell's guest only.
  if [ -n "$tests" ]; then
    mkdir -p "$d/lane/tests"
    find "$tests" -mindepth 1 -maxdepth 1 ! -name cells -exec cp -R {} "$d/lane/tests/" \;
    if [ -d "$tests/cells/$cell" ]; then
      cp -R "$tests/cells/$cell/." "$d/lane/tests/"
    fi
  fi
  echo "$cell" > "$d/lane/cell"
  printf '%s\nsuite=%s\n%s\n' "$kver" "${cell_ksuite[$cell]}" \
    "$(grep -E '^(kernel|systemd)=' "$img/info")" > "$d/lane/kernel"
  # A guest that has not reached its agent after $boot_timeout s is stuck
  # before anything of the product ran (under TCG a guest has lost a timer
  # interrupt and hung in early boot; vmlane/README.md): that cell boots
  # once more, from a fresh overlay and lane disk.
  # Likewise a guest kernel that panics before it has started init, in
  # any boot of the cell: nothing of the product has run in that boot, and
  # TCG's multi-threaded emulation has been seen to deliver a stale int3
  # while the kernel patched a static key at 2.3 s ("Oops: int3" in
  # sched_clock_cpu; a CI run, 2026-12-01). The whole cell runs again
  # from a fresh overlay and lane disk, and its summary says so. A panic
  # after init started (the product's tests run then) fails the cell.
  retried=''
  for attempt in 1 2; do
    ta=$(now_ms)
    boot_once
    [ "$attempt" -eq 1 ] || break
    if [ "$reason" = "no agent" ]; then
      retried="the agent did not start within $boot_timeout s"
    elif [ "$reason" = "kernel panic" ] && panic_before_init "$d/serial.log"; then
      retried="the guest kernel panicked before init (boot $((seen + 1)))"
    else
      break
    fi
    mv "$d/serial.log" "$d/serial-attempt1.log"
    echo "$prog: $cell: $retried: running the cell again"
  done
  [ "$reason" != "no agent" ] || reason="the agent did not start within $boot_timeout s, twice"

  # Results back: the journal first (a guest killed at its timeout never
  # unmounted /lane), then the whole file system without the inputs,
  # which are not even copied out (tests/ can hold 717 MB of harnesses).
  rm -rf "$o"
  mkdir -p "$o/lane"
  e2fsck -fy "$d/lane.img" > "$d/e2fsck.out" 2>&1 || true
  debugfs -R "ls -p /" "$d/lane.img" 2>/dev/null |
    awk -F/ -v to="$o/lane" 'NF >= 7 && $6 !~ /^(\.|\.\.|lost\+found|glove\.deb|glove-lane-guest|tests)$/ {
      printf "rdump \"/%s\" \"%s\"\n", $6, to }' > "$d/rdump.cmds" || true
  debugfs -f "$d/rdump.cmds" "$d/lane.img" > "$d/debugfs.out" 2>&1 || true
  cp "$d"/serial*.log "$d/qemu.out" "$o/" 2>/dev/null || true

  elapsed=$(secs $(($(now_ms) - t0)))
  details=''
  if [ -n "$reason" ]; then
    verdict=fail
    details="$reason; the serial log's last 40 lines:"$'\n'"$(tail -n 40 "$d/serial.log" 2>/dev/null)"
  elif [ -f "$o/lane/result" ]; then
    verdict=$(head -n 1 "$o/lane/result")
    if [ "$verdict" != pass ]; then
      verdict=fail
      # The agent's result: the verdict, then a line per check; its
      # passing checks ("ok NAME") say nothing here.
      details="agent's /lane/result:"$'\n'"$(tail -n +2 "$o/lane/result" | grep -v '^ok ' | grep . | head -n 40 || echo "(no details)")"
    fi
  else
    verdict=fail
    details="no /lane/result (qemu exit $rc; unit: $(tail -n 1 "$o/lane/unit-status" 2>/dev/null || echo never ran))"
    # What the agent said last; if it never ran, how the boot ended.
    if [ -s "$o/lane/log" ]; then
      details+="; the agent's output (/lane/log), last 20 lines:"$'\n'"$(tail -n 20 "$o/lane/log")"
    else
      details+="; the serial log's last 40 lines:"$'\n'"$(tail -n 40 "$d/serial.log" 2>/dev/null)"
    fi
  fi
  {
    echo "$prog: $cell: $verdict (kernel $kver, systemd $systemd, $elapsed s${retried:+; run twice: $retried the first time, serial-attempt1.log})"
    # Indented, without the colours of systemd's status lines.
    [ -z "$details" ] || printf '%s\n' "$details" | sed 's/\x1b\[[0-9;]*m//g; s/^/    /'
  } > "$d/summary"
  printf 'cell=%s\nverdict=%s\nkernel=%s\nsystemd=%s\ncell_seconds=%s\nagent_started_seconds=%s\nimage_build_seconds=%s\n' \
    "$cell" "$verdict" "$kver" "$systemd" "$elapsed" "${boot_at[*]:-}" \
    "$(grep ^build_seconds= "$img/info" | cut -d= -f2)" > "$o/times"
  cp "$d/summary" "$o/summary"
  echo "$prog: $cell: done, $verdict in $elapsed s"
}

failed=0
ready=()
for cell in "${run_cells[@]}"; do
  mkdir -p "$tmp/$cell"
  if ensure_image "$cell"; then
    ready+=("$cell")
  else
    { echo "$prog: $cell: fail (no image)"
      sed 's/^/    /' "$tmp/$cell/image-error" 2>/dev/null; } > "$tmp/$cell/summary"
    echo "$prog: $cell: no image: $(head -n 1 "$tmp/$cell/image-error" 2>/dev/null)"
  fi
done

# Cells run $jobs at a time (default 1: on two cores, TCG guests in
# parallel barely shorten the whole run; see vmlane/README.md).
for cell in "${ready[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_cell "$cell" &
  cell_pids+=("$!")
done
wait || true

echo
rm -f "$out/summary"
for cell in "${run_cells[@]}"; do
  if [ -f "$tmp/$cell/summary" ]; then
    cat "$tmp/$cell/summary"
  else
    echo "$prog: $cell: fail (no summary: the cell's run broke)"
  fi | tee -a "$out/summary"
  grep -q "^$prog: $cell: pass " "$out/summary" || failed=1
done
exit "$failed"
