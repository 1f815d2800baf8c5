// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"github.com/glove-sandbox/glove/testenv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
)

func testBase(t *testing.T) string { return testenv.ProtectedDir(t, "stage") }

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// codexScript is the staged entry point: a native (ELF) executable.
var codexScript = testenv.FakeELF("codex\n")

// realTree builds a package-like tree under base/name: bin/codex, lib
// files, a relative symlink and nested directories; the runtime
// directory is base/runtimes (0755). It returns source and directory.
func realTree(t *testing.T, base string) (string, string) {
	t.Helper()
	src := base + "/pkg/node_modules/@openai/codex"
	write(t, src+"/bin/codex", codexScript, 0o775)
	write(t, src+"/lib/codex.js", "console.log('codex')\n", 0o664)
	write(t, src+"/lib/vendor/deep/nested/data.bin", strings.Repeat("x", 70000), 0o600)
	write(t, src+"/lib/suid-helper", "#!/bin/sh\n", 0o4755)
	write(t, src+"/package.json", `{"name":"@openai/codex"}`, 0o644)
	mkdir(t, src+"/empty", 0o775)
	if err := os.Symlink("../lib/codex.js", src+"/bin/codex.js"); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(src+"/lib/codex.js", src+"/lib/hardlink.js"); err != nil {
		t.Fatal(err)
	}
	dir := base + "/runtimes"
	mkdir(t, dir, 0o755)
	return src, dir
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestStageRealTree(t *testing.T) {
	base := testBase(t)
	src, dir := realTree(t, base)

	rep, err := Stage(Options{Runtime: "codex", Source: src, Directory: dir, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Fatalf("dry run wrote %v", got)
	}
	if !rep.DryRun || rep.AlreadyStaged || rep.Files != 6 || rep.Symlinks != 1 || rep.Directories != 6 {
		t.Fatalf("dry run report %+v", rep)
	}

	rep2, err := Stage(Options{Runtime: "codex", Source: src, Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Digest != rep.Digest || rep2.DryRun || rep2.AlreadyStaged {
		t.Fatalf("report %+v after dry run %+v", rep2, rep)
	}
	staged := dir + "/" + rep.Digest
	if rep2.StagedPath != staged || rep2.SearchPath != staged+"/bin" || rep2.EntryPoint != staged+"/bin/codex" || rep2.Source != src || rep2.Executable != "codex" {
		t.Fatalf("report %+v", rep2)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{rep.Digest}) {
		t.Fatalf("directory holds %v", got)
	}
	f, err := discovery.Find("codex", []string{rep2.SearchPath})
	if err != nil {
		t.Fatalf("discovery: %v (%+v)", err, f)
	}
	sum := sha256.Sum256([]byte(codexScript))
	if f.Path != rep2.EntryPoint || f.Identity.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("discovery found %+v", f)
	}
	// Modes: directories 0555, files 0555/0444, set-id dropped.
	for rel, want := range map[string]os.FileMode{
		"":                                os.ModeDir | 0o555,
		"bin":                             os.ModeDir | 0o555,
		"empty":                           os.ModeDir | 0o555,
		"bin/codex":                       0o555,
		"lib/codex.js":                    0o444,
		"lib/suid-helper":                 0o555,
		"lib/vendor/deep/nested/data.bin": 0o444,
	} {
		fi, err := os.Lstat(filepath.Join(staged, rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", rel, fi.Mode(), want)
		}
	}
	if target, err := os.Readlink(staged + "/bin/codex.js"); err != nil || target != "../lib/codex.js" {
		t.Errorf("link: %q %v", target, err)
	}
	var a, b unix.Stat_t
	unix.Stat(staged+"/lib/codex.js", &a)
	unix.Stat(staged+"/lib/hardlink.js", &b)
	if a.Ino == b.Ino || a.Nlink != 1 {
		t.Errorf("hard link kept: ino %d %d nlink %d", a.Ino, b.Ino, a.Nlink)
	}

	// Staging again: already staged, nothing changed.
	var before unix.Stat_t
	unix.Stat(staged, &before)
	rep3, err := Stage(Options{Runtime: "codex", Source: src, Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	var after unix.Stat_t
	unix.Stat(staged, &after)
	if !rep3.AlreadyStaged || rep3.Digest != rep.Digest || before.Ino != after.Ino || before.Ctim != after.Ctim {
		t.Fatalf("second stage %+v", rep3)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{rep.Digest}) {
		t.Fatalf("directory holds %v", got)
	}
}

func TestStageDigest(t *testing.T) {
	base := testBase(t)
	src, _ := realTree(t, base)
	digest := func() string {
		t.Helper()
		tr, err := Walk("codex", src, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		return tr.Digest
	}
	d1, d2 := digest(), digest()
	if d1 != d2 || len(d1) != 64 {
		t.Fatalf("digests %s %s", d1, d2)
	}
	// One byte changed.
	write(t, src+"/lib/codex.js", "console.log('codeX')\n", 0o664)
	d3 := digest()
	if d3 == d1 {
		t.Fatal("digest unchanged after one byte changed")
	}
	// One exec bit changed.
	os.Chmod(src+"/package.json", 0o744)
	d4 := digest()
	if d4 == d3 {
		t.Fatal("digest unchanged after an exec bit changed")
	}
	// Other mode bits are not part of the digest.
	os.Chmod(src+"/package.json", 0o700)
	if d5 := digest(); d5 != d4 {
		t.Fatal("digest changed with a non-exec mode bit")
	}
}

// TestStageDigestPreimage pins the preimage described in the package doc.
func TestStageDigestPreimage(t *testing.T) {
	f := func(s string) string {
		n := len(s)
		return string([]byte{0, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + s
	}
	content := sha256.Sum256([]byte("hi\n"))
	pre := f("glove.stage-tree-v1") +
		f("d") + f("bin") +
		f("f") + f("bin/codex") + f("1") + f("3") + f(string(content[:])) +
		f("l") + f("c") + f("bin/codex")
	want := sha256.Sum256([]byte(pre))
	got := Digest([]Entry{
		{Kind: Dir, Path: "bin"},
		{Kind: File, Path: "bin/codex", Exec: true, Size: 3, SHA256: content},
		{Kind: Symlink, Path: "c", Target: "bin/codex"},
	})
	if got != hex.EncodeToString(want[:]) {
		t.Fatalf("digest %s, want %x", got, want)
	}
	// Moving a boundary between fields changes the digest.
	if Digest([]Entry{{Kind: Symlink, Path: "ab", Target: "c"}}) == Digest([]Entry{{Kind: Symlink, Path: "a", Target: "bc"}}) {
		t.Fatal("field boundary not in the digest")
	}
}

func TestStageTamperedExisting(t *testing.T) {
	base := testBase(t)
	src, dir := realTree(t, base)
	rep, err := Stage(Options{Runtime: "codex", Source: src, Directory: dir, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	staged := dir + "/" + rep.Digest
	// A tree at DIR/<digest> with other content.
	write(t, staged+"/bin/codex", "#!/bin/sh\necho evil\n", 0o755)
	_, err = Stage(Options{Runtime: "codex", Source: src, Directory: dir})
	if err == nil || !strings.Contains(err.Error(), staged+" exists with different content") || !strings.Contains(err.Error(), "not overwritten") {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(staged + "/bin/codex"); string(b) != "#!/bin/sh\necho evil\n" {
		t.Fatal("tampered tree overwritten")
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{rep.Digest}) {
		t.Fatalf("directory holds %v", got)
	}
}

func TestStageRefusals(t *testing.T) {
	base := testBase(t)
	dir := base + "/runtimes"
	mkdir(t, dir, 0o755)
	n := 0
	tree := func() string {
		n++
		src := filepath.Join(base, "src", string(rune('a'+n)))
		write(t, src+"/bin/codex", codexScript, 0o755)
		return src
	}
	for _, c := range []struct {
		name  string
		setup func() (src, dir string)
		want  string
	}{
		{"absolute symlink", func() (string, string) {
			s := tree()
			os.Symlink("/etc/passwd", s+"/bin/passwd")
			return s, dir
		}, `bin/passwd: symbolic link to an absolute path "/etc/passwd"`},
		{"escaping symlink", func() (string, string) {
			s := tree()
			os.Symlink("../../outside", s+"/bin/out")
			return s, dir
		}, `bin/out: symbolic link target "../../outside" escapes the source tree`},
		{"dotdot after a name", func() (string, string) {
			s := tree()
			os.Symlink(".", s+"/self")
			os.Symlink("self/..", s+"/up")
			return s, dir
		}, `up: symbolic link target "self/.." has ".." after a name`},
		{"fifo", func() (string, string) {
			s := tree()
			unix.Mkfifo(s+"/zz-fifo", 0o644)
			return s, dir
		}, "zz-fifo: is a named pipe (fifo)"},
		{"harness home in the tree", func() (string, string) {
			s := tree()
			write(t, s+"/share/.codex/auth.json", "{}", 0o600)
			return s, dir
		}, "share/.codex: a harness home directory (.codex)"},
		{"source in a harness home", func() (string, string) {
			s := base + "/home/u/.claude/local"
			write(t, s+"/bin/codex", codexScript, 0o755)
			return s, dir
		}, "harness home (.claude)"},
		{"source linked into a harness home", func() (string, string) {
			s := base + "/home/v/.config/tool"
			write(t, s+"/bin/codex", codexScript, 0o755)
			os.Symlink(s, base+"/innocent")
			return base + "/innocent", dir
		}, "harness home (.config)"},
		{"missing entry point", func() (string, string) {
			s := filepath.Join(base, "noentry")
			write(t, s+"/lib/x", "x", 0o644)
			return s, dir
		}, "no entry point bin/codex or codex in " + base + "/noentry"},
		{"entry point is a symlink", func() (string, string) {
			s := filepath.Join(base, "linkentry")
			write(t, s+"/lib/codex", codexScript, 0o755)
			os.MkdirAll(s+"/bin", 0o755)
			os.Symlink("../lib/codex", s+"/bin/codex")
			return s, dir
		}, "entry point bin/codex in " + base + "/linkentry is a symbolic link"},
		{"entry point not executable", func() (string, string) {
			s := filepath.Join(base, "noexec")
			write(t, s+"/codex", codexScript, 0o644)
			return s, dir
		}, "entry point codex in " + base + "/noexec is not executable"},
		{"group-writable directory", func() (string, string) {
			d := base + "/gw"
			mkdir(t, d, 0o775)
			return tree(), d
		}, "writable by group or others (mode 0775)"},
		{"directory inside source", func() (string, string) {
			s := tree()
			mkdir(t, s+"/rt", 0o755)
			return s, s + "/rt"
		}, "is inside the source"},
		{"source inside directory", func() (string, string) {
			s := dir + "/pkg"
			write(t, s+"/bin/codex", codexScript, 0o755)
			return s, dir
		}, "is inside the directory"},
		{"relative source", func() (string, string) {
			return "pkg", dir
		}, "not an absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, d := c.setup()
			before := listDir(t, dir)
			rep, err := Stage(Options{Runtime: "codex", Source: s, Directory: d})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Stage = %+v, %v; want an error containing %q", rep, err, c.want)
			}
			if after := listDir(t, dir); !slices.Equal(before, after) {
				t.Fatalf("directory changed: %v -> %v", before, after)
			}
		})
	}
}

func TestStageSingleFile(t *testing.T) {
	base := testBase(t)
	dir := base + "/runtimes"
	mkdir(t, dir, 0o755)
	write(t, base+"/dist/claude-1.2.3", testenv.FakeELF("claude\n"), 0o775)
	os.Symlink("dist/claude-1.2.3", base+"/claude-latest")
	rep, err := Stage(Options{Runtime: "claude-code", Source: base + "/claude-latest", Directory: dir})
	if err != nil {
		t.Fatal(err)
	}
	staged := dir + "/" + rep.Digest
	if rep.Source != base+"/dist/claude-1.2.3" || rep.SearchPath != staged || rep.EntryPoint != staged+"/claude" || rep.Files != 1 || rep.Directories != 0 {
		t.Fatalf("report %+v", rep)
	}
	f, err := discovery.Find("claude-code", []string{rep.SearchPath})
	if err != nil || f.Path != staged+"/claude" {
		t.Fatalf("discovery %+v %v", f, err)
	}
	if got := listDir(t, staged); !slices.Equal(got, []string{"claude"}) {
		t.Fatalf("staged %v", got)
	}
	// A non-executable single file has no entry point.
	write(t, base+"/dist/plain", "x", 0o644)
	if _, err := Stage(Options{Runtime: "claude-code", Source: base + "/dist/plain", Directory: dir}); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Fatalf("err %v", err)
	}
}

// TestStageFailureCleansUp fails in the middle of the copy (a file
// changed after it was hashed; a write fault) and checks that no
// temporary .stage-* directory is left.
func TestStageFailureCleansUp(t *testing.T) {
	base := testBase(t)
	src, dir := realTree(t, base)
	t.Cleanup(func() { testHookBeforeCopy, testHookCopyFile = nil, nil })

	testHookBeforeCopy = func() {
		write(t, src+"/lib/vendor/deep/nested/data.bin", strings.Repeat("y", 70000), 0o600)
	}
	_, err := Stage(Options{Runtime: "codex", Source: src, Directory: dir})
	if err == nil || !strings.Contains(err.Error(), "data.bin: changed while it was being staged") {
		t.Fatalf("err %v", err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}

	testHookBeforeCopy = nil
	copied := 0
	testHookCopyFile = func(rel string) error {
		if copied++; copied == 4 {
			return errors.New("simulated write fault")
		}
		return nil
	}
	_, err = Stage(Options{Runtime: "codex", Source: src, Directory: dir})
	if err == nil || !strings.Contains(err.Error(), "simulated write fault") {
		t.Fatalf("err %v", err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}

	// A fifo found late in the walk: refused before anything is created.
	testHookCopyFile = nil
	unix.Mkfifo(src+"/zzz-late-fifo", 0o644)
	if _, err = Stage(Options{Runtime: "codex", Source: src, Directory: dir}); err == nil || !strings.Contains(err.Error(), "zzz-late-fifo: is a named pipe") {
		t.Fatalf("err %v", err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
}

func TestStageLinkInside(t *testing.T) {
	for _, c := range []struct {
		rel, target string
		ok          bool
	}{
		{"bin/x", "../lib/x", true},
		{"bin/x", "./y", true},
		{"bin/x", "../../x", false},
		{"x", "..", false},
		{"x", "/abs", false},
		{"x", "", false},
		{"a/b/x", "../../c", true},
		{"a/x", "b/../c", false},
		{"a/x", "../a/../../c", false},
	} {
		if err := linkInside(c.rel, c.target); (err == nil) != c.ok {
			t.Errorf("linkInside(%q, %q) = %v", c.rel, c.target, err)
		}
	}
}
