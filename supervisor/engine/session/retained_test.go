// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

func listImages(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.img"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Base(names[i])
	}
	return names
}

// TestGloveRunRetainedWrite runs a plan with a retained_write grant: the
// harness writes into an ext4 image of max_bytes (and cannot write more),
// and afterwards the image is kept in the materialization root, detached,
// holding the write, while the host tree is unchanged.
func TestGloveRunRetainedWrite(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	images := filepath.Join(e.Base, "images") // testenv.DefaultConfigs' materialization_root
	// Runs before the leak check (cleanups run last first).
	t.Cleanup(func() { testenv.WaitImagesDetached(t, images) })
	exe := buildHarness(t, e)
	ws := workspace(t, e, map[string]string{"in": "granted tree"})
	const quota = 16 << 20
	_, polFile, planFile, _ := planFiles(t, e, exe, ws, []string{"--fill=" + strconv.Itoa(quota+1)}, policy.AccessTuple{
		Access: policy.AccessRetainedWrite, Materialization: policy.MaterializationCopy,
		CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRetain, MaxBytes: quota})
	before := listImages(t, images)

	// Without a materialization root, nothing is made.
	_, stderr, code := gloveRun(t, e, ws, "", "--policy", polFile, "--plan", planFile)
	if code != 125 || !strings.Contains(stderr, "--materialization-root") {
		t.Errorf("without --materialization-root: exit %d, stderr %q; want 125 naming the flag", code, stderr)
	}
	if now := listImages(t, images); !slices.Equal(now, before) {
		t.Errorf("images %v after a refused run, want %v", now, before)
	}

	stdout, stderr, code := gloveRun(t, e, ws, "", "--policy", polFile, "--plan", planFile, "--materialization-root", images)
	var made []string
	for _, n := range listImages(t, images) {
		if !slices.Contains(before, n) {
			made = append(made, n)
			t.Cleanup(func() { os.Remove(filepath.Join(images, n)) })
		}
	}
	if code != 7 {
		t.Fatalf("exit %d, want the harness's 7\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "write: <nil>\n") || !strings.Contains(stdout, "fill: ") || !strings.Contains(stdout, "no space left on device") {
		t.Errorf("stdout %q: want the write to succeed and writing %d bytes into a %d-byte image to fail with ENOSPC", stdout, quota+1, quota)
	}
	if len(made) != 1 || !strings.HasPrefix(made[0], "run-") || !strings.HasSuffix(made[0], "_workspace.img") {
		t.Fatalf("new images %v, want one run-*_workspace.img", made)
	}
	name := made[0]
	// The images were synced and frozen (Freeze) before their mounts
	// closed: a failure there is reported after the program's result.
	if strings.Contains(stderr, "ended, but") {
		t.Errorf("clean-up after the session failed: %s", stderr)
	}
	if !strings.Contains(stderr, "retained /workspace: staged in "+filepath.Join(images, name)) {
		t.Errorf("stderr %q does not say where the staged change is", stderr)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(images, name), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != quota || st.Uid != uint32(e.UID) || st.Mode&0o7777 != 0o600 {
		t.Errorf("image: size %d, uid %d, mode %04o; want %d, %d, 0600", st.Size, st.Uid, st.Mode&0o7777, quota, e.UID)
	}
	// Detached once the session is over: its loop device is gone.
	testenv.WaitImagesDetached(t, images)

	// The host tree is unchanged.
	if got, err := os.ReadFile(filepath.Join(ws, "in")); err != nil || string(got) != "granted tree" {
		t.Errorf("host in: %q, %v", got, err)
	}
	for _, n := range []string{"out", "big", "lost+found"} {
		if _, err := os.Lstat(filepath.Join(ws, n)); err == nil {
			t.Errorf("the retained copy's %s reached the host", n)
		}
	}

	// The image holds the copy and the harness's write: attached
	// read-only by glove-loopext4, as an inspector would.
	r := e.ReadImage(t, images, name, "out", "in", "big", "lost+found")
	if r[0].Err != nil || r[0].Data != "written" {
		t.Errorf("out in the image: %q, %v; want %q", r[0].Data, r[0].Err, "written")
	}
	if r[1].Err != nil || r[1].Data != "granted tree" {
		t.Errorf("in in the image: %q, %v; want the copy", r[1].Data, r[1].Err)
	}
	for i, n := range []string{"big", "lost+found"} {
		if !errors.Is(r[2+i].Err, unix.ENOENT) {
			t.Errorf("%s in the image: %v, want ENOENT", n, r[2+i].Err)
		}
	}
	testenv.WaitImagesDetached(t, images)

	// A host tree larger than the image fails the launch with
	// limit:disk_bytes, and the image it was copied into is removed.
	big := workspace(t, e, map[string]string{"big": strings.Repeat("b", quota)})
	_, polFile, planFile, _ = planFiles(t, e, exe, big, []string{"--fill=1"}, policy.AccessTuple{
		Access: policy.AccessRetainedWrite, Materialization: policy.MaterializationCopy,
		CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRetain, MaxBytes: quota})
	before = listImages(t, images)
	_, stderr, code = gloveRun(t, e, big, "", "--policy", polFile, "--plan", planFile, "--materialization-root", images)
	if code != 125 || !strings.Contains(stderr, "limit:disk_bytes") {
		t.Errorf("a copy larger than the image: exit %d, stderr %q; want 125 and limit:disk_bytes", code, stderr)
	}
	if now := listImages(t, images); !slices.Equal(now, before) {
		t.Errorf("images %v after a launch that failed, want %v (its image removed)", now, before)
	}
}

func TestImageName(t *testing.T) {
	if got := session.ImageName("run-0a1b2c3d", "workspace"); got != "run-0a1b2c3d_workspace.img" {
		t.Errorf("ImageName = %q", got)
	}
	long := strings.Repeat("s", 64)
	a, b := session.ImageName(long, "alias-one"), session.ImageName(long, "alias-two")
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasSuffix(a, ".img") {
		t.Errorf("long names %q and %q: want 64 bytes each, distinct, ending in .img", a, b)
	}
}

func TestRetainedCopyCheck(t *testing.T) {
	base := func(ms ...session.Mount) *session.Launch {
		return &session.Launch{Name: "s1", Executable: "/bin/true", Mounts: ms,
			Limits: policy.ResourceProfile{CPUTimeMs: 1, MemoryBytes: 1, Pids: 1, WallTimeMs: 1, DiskBytes: 1, TerminalOutputBytes: 1}}
	}
	ok := session.Mount{Target: "/w", Kind: session.RetainedCopy, HostPath: "/srv/w", Alias: "w", MaxBytes: 1 << 20}
	if err := base(ok).Check(); err != nil {
		t.Errorf("a retained copy: %v", err)
	}
	if !base(ok).Retains() || base().Retains() {
		t.Error("Retains does not tell a launch with a retained copy")
	}
	bad := map[string]*session.Launch{
		"no quota":        base(session.Mount{Target: "/w", Kind: session.RetainedCopy, HostPath: "/srv/w", Alias: "w"}),
		"read-only":       base(session.Mount{Target: "/w", Kind: session.RetainedCopy, HostPath: "/srv/w", Alias: "w", MaxBytes: 1, ReadOnly: true}),
		"no alias":        base(session.Mount{Target: "/w", Kind: session.RetainedCopy, HostPath: "/srv/w", MaxBytes: 1}),
		"bad alias":       base(session.Mount{Target: "/w", Kind: session.RetainedCopy, HostPath: "/srv/w", Alias: "a/b", MaxBytes: 1}),
		"one image twice": base(ok, session.Mount{Target: "/v", Kind: session.RetainedCopy, HostPath: "/srv/v", Alias: "w", MaxBytes: 1}),
	}
	for name, l := range bad {
		if err := l.Check(); !errors.Is(err, session.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// Without glove-loopext4, nothing is made.
	if _, err := session.Run(t.Context(), &session.Env{}, base(ok), nil, session.IO{}); !errors.Is(err, session.ErrNoImages) {
		t.Errorf("Run without glove-loopext4: %v, want ErrNoImages", err)
	}
}
