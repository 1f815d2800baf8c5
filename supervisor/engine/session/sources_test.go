// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"github.com/glove-sandbox/glove/testenv"
)

// discoveryDir makes a protected directory (testenv.ProtectedDir)
// holding an executable named codex.
func discoveryDir(t *testing.T) (dir, exe string) {
	t.Helper()
	dir = testenv.ProtectedDir(t, "session-discovery")
	exe = filepath.Join(dir, "codex")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, exe
}

// TestRecheckExecutable: a discovered executable is pinned at resolve
// time; the launch fails closed when the file changed in place, was
// replaced, or the mount is of another file.
func TestRecheckExecutable(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, exe string)
		ok     bool
	}{
		{"unchanged", func(*testing.T, string) {}, true},
		{"rewritten in place, same size", func(t *testing.T, exe string) {
			f, err := os.OpenFile(exe, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("two"), int64(len("#!/bin/sh\necho "))); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"replaced by rename", func(t *testing.T, exe string) {
			tmp := exe + ".new"
			if err := os.WriteFile(tmp, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, exe); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"made group-writable", func(t *testing.T, exe string) {
			if err := os.Chmod(exe, 0o775); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, exe := discoveryDir(t)
			pin, err := resolveExecutable("codex", []string{filepath.Join(dir, "missing"), dir})
			if err != nil {
				t.Fatal(err)
			}
			if pin.Path != exe {
				t.Fatalf("pinned %s, want %s", pin.Path, exe)
			}
			// The mount stands for what the program would run: the file
			// as it was opened before the change (a bind keeps the inode).
			mnt, err := os.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer mnt.Close()
			c.change(t, exe)
			err = recheckExecutable(pin, mnt)
			if c.ok && err != nil {
				t.Errorf("recheck: %v", err)
			}
			if !c.ok && err == nil {
				t.Error("recheck passed a changed executable")
			}
			if !c.ok && err != nil && c.name != "made group-writable" && !errors.Is(err, discovery.ErrChanged) {
				t.Errorf("recheck: %v, want ErrChanged", err)
			}
		})
	}
	t.Run("mount of another file", func(t *testing.T) {
		dir, _ := discoveryDir(t)
		pin, err := resolveExecutable("codex", []string{dir})
		if err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(dir, "other")
		if err := os.WriteFile(other, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		mnt, err := os.Open(other)
		if err != nil {
			t.Fatal(err)
		}
		defer mnt.Close()
		if err := recheckExecutable(pin, mnt); !errors.Is(err, discovery.ErrChanged) {
			t.Errorf("recheck with another file's mount: %v, want ErrChanged", err)
		}
	})
	t.Run("nothing installed", func(t *testing.T) {
		dir, exe := discoveryDir(t)
		os.Remove(exe)
		_, err := resolveExecutable("codex", []string{dir})
		if !errors.Is(err, discovery.ErrNotInstalled) {
			t.Errorf("resolve with nothing installed: %v, want ErrNotInstalled", err)
		}
	})
}

func TestNativeAdapterTable(t *testing.T) {
	for rt, a := range nativeAdapters {
		if !strings.HasPrefix(a.skillDir, HomeDir+"/") {
			t.Errorf("%s: skill directory %s is not beneath %s", rt, a.skillDir, HomeDir)
		}
		if _, ok := cutDir(a.skillDir, HomeDir); !ok {
			t.Errorf("%s: cutDir(%s)", rt, a.skillDir)
		}
		for _, e := range a.env {
			name, val, _ := strings.Cut(e, "=")
			if !strings.HasPrefix(val, HomeDir+"/") || name == "HOME" {
				t.Errorf("%s: managed variable %s", rt, e)
			}
		}
	}
	l := &Launch{}
	if privateHome(l, "cloudflare-os") || l.Skills != nil || len(l.Mounts) != 0 {
		t.Error("a runtime outside the table got a private home")
	}
	if !privateHome(l, "opencode") || l.Skills == nil || l.Skills.SkillDir != "/home/agent/.config/opencode/skills" {
		t.Errorf("opencode: %+v", l.Skills)
	}
	want := []string{"HOME=/home/agent", "XDG_CONFIG_HOME=/home/agent/.config"}
	if strings.Join(l.Env, " ") != strings.Join(want, " ") {
		t.Errorf("opencode env %q, want %q", l.Env, want)
	}
}

// bundleRoot makes a bundle root of the caller (0700) holding the
// manifests, and returns it opened.
func bundleRoot(t *testing.T, ms ...*library.Manifest) (*library.Root, string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundles")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var digests []string
	for _, m := range ms {
		d, err := library.Write(dir, m)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
	}
	r, err := library.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir, digests
}

func skill(name, body string) library.Entry {
	return library.Entry{Kind: library.KindSkill, Name: name, Files: []library.File{{Path: "SKILL.md", Content: []byte(body)}}}
}

// TestCopyBundleChangedAfterVerification: the attack is rewriting the
// bundle file in place (same inode, so the verified descriptor sees it)
// between Resolve and the copy into the sandbox's tmpfs. The copy is
// hashed as it is made and the launch fails; unchanged, the copy is the
// file byte for byte, read-only.
func TestCopyBundleChangedAfterVerification(t *testing.T) {
	m := &library.Manifest{Schema: library.Schema, Entries: []library.Entry{skill("alpha", "# alpha\n")}}
	for _, tamper := range []bool{false, true} {
		r, dir, ds := bundleRoot(t, m)
		b, err := r.Open(ds[0])
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if tamper {
			f, err := os.OpenFile(filepath.Join(dir, ds[0]), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("X"), 10); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		dstDir := t.TempDir()
		dst, err := os.Open(dstDir)
		if err != nil {
			t.Fatal(err)
		}
		err = copyBundle(dst, b)
		dst.Close()
		if tamper {
			if !errors.Is(err, library.ErrDigest) {
				t.Errorf("tampered bundle copied: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("copy: %v", err)
		}
		want, _ := os.ReadFile(filepath.Join(dir, ds[0]))
		got, err := os.ReadFile(filepath.Join(dstDir, ds[0]))
		if err != nil || string(got) != string(want) {
			t.Errorf("copy differs: %v", err)
		}
		if st, err := os.Stat(filepath.Join(dstDir, ds[0])); err != nil || st.Mode().Perm() != 0o444 {
			t.Errorf("copy mode: %v %v", st.Mode(), err)
		}
	}
}

// TestResolveLibraries: projections, the library mount, the skills and
// the projection digest; the same skill name in two bundles is refused;
// a runtime outside the table keeps skills in the bundle files only.
func TestResolveLibraries(t *testing.T) {
	a := &library.Manifest{Schema: library.Schema, Entries: []library.Entry{
		{Kind: library.KindPrompt, Name: "p", Files: []library.File{{Path: "p.md", Content: []byte("p")}}}, skill("alpha", "# a\n")}}
	b := &library.Manifest{Schema: library.Schema, Entries: []library.Entry{skill("beta", "# b\n")}}
	dup := &library.Manifest{Schema: library.Schema, Entries: []library.Entry{skill("alpha", "# other a\n")}}
	r, _, ds := bundleRoot(t, a, b, dup)
	req := func(ds ...string) []libraryRequest {
		var out []libraryRequest
		for _, d := range ds {
			out = append(out, libraryRequest{digest: d, destination: "libraries", target: "/opt/lib"})
		}
		return out
	}

	l := &Launch{}
	privateHome(l, "codex")
	empty := l.Skills.Digest
	pins := &Pins{}
	defer closePins(t, pins)
	if err := resolveLibraries(l, pins, Sources{Libraries: r}, req(ds[0], ds[1]), "codex"); err != nil {
		t.Fatal(err)
	}
	if len(l.Projections) != 2 || l.Projections[1].Target != "/opt/lib/"+ds[1] || l.Projections[0].Identifier != "libraries/"+ds[0] {
		t.Errorf("projections %+v", l.Projections)
	}
	var libs []Mount
	for _, m := range l.Mounts {
		if m.Kind == LibraryBundles {
			libs = append(libs, m)
		}
	}
	if len(libs) != 1 || len(libs[0].Bundles) != 2 || !libs[0].ReadOnly {
		t.Errorf("library mounts %+v", libs)
	}
	if len(l.Skills.Skills) != 2 || l.Skills.Skills[0].Name != "alpha" || l.Skills.Skills[1].Name != "beta" || l.Skills.Digest == empty {
		t.Errorf("skills %+v", l.Skills)
	}
	home := t.TempDir()
	hf, err := os.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	if err := fillHome(hf, l, pins); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"alpha": "# a\n", "beta": "# b\n"} {
		got, err := os.ReadFile(filepath.Join(home, ".codex/skills", name, "SKILL.md"))
		if err != nil || string(got) != body {
			t.Errorf("skill %s: %q %v", name, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".codex/skills/p")); err == nil {
		t.Error("a prompt entry was expanded into the home")
	}

	l2 := &Launch{}
	privateHome(l2, "codex")
	pins2 := &Pins{}
	err = resolveLibraries(l2, pins2, Sources{Libraries: r}, req(ds[0], ds[2]), "codex")
	closePins(t, pins2)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `skill "alpha"`) {
		t.Errorf("one skill in two bundles: %v", err)
	}

	l3, pins3 := &Launch{}, &Pins{}
	if err := resolveLibraries(l3, pins3, Sources{Libraries: r}, req(ds[0]), "cloudflare-os"); err != nil || l3.Skills != nil || len(l3.Projections) != 1 {
		t.Errorf("runtime outside the table: %v %+v", err, l3.Skills)
	}
	closePins(t, pins3)

	if err := resolveLibraries(&Launch{}, &Pins{}, Sources{}, req(ds[0]), "codex"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("no bundle root: %v", err)
	}
	many := req(ds[0], ds[1], ds[2], ds[0], ds[1], ds[2], ds[0], ds[1], ds[2])
	if err := resolveLibraries(&Launch{}, &Pins{}, Sources{Libraries: r}, many, "codex"); !errors.Is(err, ErrInvalid) {
		t.Errorf("nine projections: %v", err)
	}
	bad := []libraryRequest{{digest: ds[0], destination: "libraries", target: "/opt/lib with space"}}
	l4, pins4 := &Launch{}, &Pins{}
	if err := resolveLibraries(l4, pins4, Sources{Libraries: r}, bad, "codex"); !errors.Is(err, ErrInvalid) {
		t.Errorf("a target a receipt cannot carry: %v", err)
	}
	closePins(t, pins4)
}

// closePins closes a test's pins, failing the test if one will not.
func closePins(t *testing.T, p *Pins) {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Error(err)
	}
}

// stagedTree stages a small codex platform package (an entry point with
// sibling executables and a data file beside it) into a protected
// runtime directory and returns the staged root and its search path.
func stagedTree(t *testing.T, tag string) (root, searchPath string) {
	t.Helper()
	base := testenv.ProtectedDir(t, "session-stage")
	src := filepath.Join(base, "pkg")
	for rel, content := range map[string]string{
		"vendor/x-linux/bin/codex":                 testenv.FakeELF("codex" + tag),
		"vendor/x-linux/bin/codex-code-mode-host":  testenv.FakeELF("host"),
		"vendor/x-linux/codex-path/rg":             testenv.FakeELF("rg"),
		"vendor/x-linux/codex-package.json":        `{"entrypoint":"bin/codex"}`,
		"vendor/x-linux/codex-resources/bwrap.txt": "not executable",
	} {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o755)
		if strings.HasSuffix(rel, ".json") || strings.HasSuffix(rel, ".txt") {
			mode = 0o644
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(base, "runtimes")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rep, err := stage.Stage(stage.Options{Runtime: "codex", Source: src, Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	return rep.StagedPath, rep.SearchPath
}

// TestResolveStagedTree: an executable discovered in a staged tree is
// launched from the whole tree, bound read-only at its own path (issue
// 32: binding the executable alone hid codex's sibling executables),
// pinned with its content digest, which goes into the launch digest and
// the receipt.
func TestResolveStagedTree(t *testing.T) {
	root, search := stagedTree(t, "")
	pin, err := resolveExecutable("codex", []string{search})
	if err != nil {
		t.Fatal(err)
	}
	if pin.Stage == nil || pin.Stage.Root != root || pin.Stage.TreeDigest != filepath.Base(root) || pin.Mount() != root {
		t.Fatalf("pin %+v (stage %+v), want the stage tree %s", pin, pin.Stage, root)
	}
	tmpl := policy.RuntimeTemplate{RuntimeTemplateID: "codex-staged", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		Launch: policy.Launch{RuntimeDiscovery: "codex", ExecutableSearchPaths: []string{search}}}
	tmpl.AdapterCommandDigest = policy.AdapterDigest(&tmpl)
	prof := policy.ResourceProfile{ProfileID: "tiny", CPUTimeMs: 5000, MemoryBytes: 256 << 20, Pids: 64, WallTimeMs: 20000, DiskBytes: 8 << 20, TerminalOutputBytes: 1 << 20}
	pol := &policy.Policy{SchemaVersion: 1, Revision: 1, MaxPlanTTLMs: 600000, RuntimeTemplates: []policy.RuntimeTemplate{tmpl}, ResourceProfiles: []policy.ResourceProfile{prof}}
	if err := policy.Validate(pol); err != nil {
		t.Fatal(err)
	}
	pl := &plan.Plan{SchemaVersion: 1, PolicyRevision: 1, RuntimeTemplateID: tmpl.RuntimeTemplateID, RuntimeID: "codex",
		SandboxBackend: policy.BackendLinuxProduction, AdapterCommandDigest: tmpl.AdapterCommandDigest, ResourceProfile: prof}
	l, pins, err := Resolve(pol, pl, "staged", Sources{})
	if err != nil {
		t.Fatal(err)
	}
	defer pins.Close()
	if l.Executable != search+"/codex" {
		t.Fatalf("executable %s", l.Executable)
	}
	var binds []string
	for _, m := range l.Mounts {
		if m.Kind == ReadOnlyBind {
			binds = append(binds, m.Target)
		}
	}
	if len(binds) != 1 || binds[0] != root || l.Mounts[0].HostPath != root {
		t.Fatalf("read-only binds %v, want the stage tree %s alone (not the executable by itself)", binds, root)
	}
	if b := Outcome(l, nil); b.StageTreeDigest != filepath.Base(root) {
		t.Fatalf("receipt stage_tree_digest %q", b.StageTreeDigest)
	}
	d1 := LaunchDigest(l, tmpl.AdapterCommandDigest, nil)
	l.ExecutablePin.Stage.TreeDigest = strings.Repeat("0", 64)
	if LaunchDigest(l, tmpl.AdapterCommandDigest, nil) == d1 {
		t.Fatal("the stage tree digest is not in the launch digest")
	}
}

// TestRecheckStageTree: the tree is pinned at resolve time; the launch
// fails closed when it was changed or replaced before the program is
// released, judged through the mount the program would run from.
func TestRecheckStageTree(t *testing.T) {
	chmodW := func(t *testing.T, p string, mode os.FileMode) {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		// change runs after resolve; openAfter opens the "mount" after
		// it (a tree replaced before its mount was made).
		change    func(t *testing.T, root string)
		openAfter bool
		ok        bool
	}{
		{"unchanged", func(*testing.T, string) {}, false, true},
		{"sibling rewritten in place, same size", func(t *testing.T, root string) {
			p := root + "/vendor/x-linux/codex-path/rg"
			chmodW(t, p, 0o755)
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			if err := os.WriteFile(p, b, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false, false},
		{"file added", func(t *testing.T, root string) {
			chmodW(t, root+"/vendor/x-linux", 0o755)
			if err := os.WriteFile(root+"/vendor/x-linux/extra", []byte("x"), 0o444); err != nil {
				t.Fatal(err)
			}
		}, false, false},
		{"data file mode changed", func(t *testing.T, root string) {
			chmodW(t, root+"/vendor/x-linux/codex-package.json", 0o555)
		}, false, false},
		{"tree replaced by rename", func(t *testing.T, root string) {
			// Another tree with the same content, renamed over it:
			// equal digest, another identity.
			other := root + ".new"
			if err := os.CopyFS(other, os.DirFS(root)); err != nil {
				t.Fatal(err)
			}
			chmodW(t, filepath.Dir(root), 0o755)
			if err := os.Rename(root, root+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, root); err != nil {
				t.Fatal(err)
			}
		}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, search := stagedTree(t, c.name)
			pin, err := resolveExecutable("codex", []string{search})
			if err != nil {
				t.Fatal(err)
			}
			open := func() *os.File {
				mnt, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { mnt.Close() })
				return mnt
			}
			var mnt *os.File
			if !c.openAfter {
				mnt = open()
			}
			c.change(t, root)
			if c.openAfter {
				mnt = open()
			}
			err = recheckExecutable(pin, mnt)
			if c.ok != (err == nil) {
				t.Fatalf("recheck: %v", err)
			}
			if !c.ok && !errors.Is(err, stage.ErrChanged) && !errors.Is(err, discovery.ErrChanged) {
				t.Fatalf("recheck: %v, want ErrChanged", err)
			}
			// The tree's own check, on its own: it must catch every
			// change, whether or not the executable's pin does too.
			if err := pin.Stage.tree.Recheck(mnt); c.ok != (err == nil) || !c.ok && !errors.Is(err, stage.ErrChanged) {
				t.Fatalf("tree recheck: %v", err)
			}
		})
	}
	t.Run("content no longer its name", func(t *testing.T) {
		root, search := stagedTree(t, "x")
		p := root + "/vendor/x-linux/codex-package.json"
		chmodW(t, p, 0o644)
		if err := os.WriteFile(p, []byte(`{"entrypoint":"bin/other"}`), 0o444); err != nil {
			t.Fatal(err)
		}
		if _, err := resolveExecutable("codex", []string{search}); !errors.Is(err, stage.ErrChanged) || !strings.Contains(err.Error(), "not its name") {
			t.Fatalf("resolve: %v, want a refusal naming the digest mismatch", err)
		}
	})
}
