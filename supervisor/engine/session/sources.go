// SPDX-License-Identifier: Apache-2.0

package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"golang.org/x/sys/unix"
)

// This file holds the launch inputs that come from the host beyond the
// policy's own paths: a discovered executable (pinned at resolve time,
// rechecked before the program is released), the private home of a
// native-skill runtime with the skills the plan's bundles carry, and the
// library bundles themselves.

// Mount kinds of the launch sources.
const (
	// PrivateHome is a fresh tmpfs of MaxBytes at HomeDir, mode 0700,
	// into which the launch's skill entries (Launch.Skills) are expanded
	// before the program exists. Nothing of an operator's own harness
	// home is ever read or mounted (threat: a session reading or
	// planting the operator's credentials and configuration).
	PrivateHome = "private_home"
	// LibraryBundles is a read-only tmpfs at a library destination's
	// target holding the verified bundle files named by digest
	// (Mount.Bundles). The bytes placed there are the bytes hashed while
	// they were copied, so a bundle file changed after Resolve verified
	// it fails the launch instead of reaching the sandbox (threat: a
	// swap between verification and mount).
	LibraryBundles = "library_bundles"
)

// HomeDir is the private home of a native-skill runtime.
const HomeDir = "/home/agent"

// MaxLibraryProjections bounds the bundles one launch projects: each is
// read and decoded (up to library.MaxBundleBytes) while the supervisor
// resolves the launch, and the terminal receipt lists every projection.
const MaxLibraryProjections = 8

// maxProjectionListBytes bounds the projection list's JSON in the
// receipt, whose envelope is at most receipt.MaxEnvelopeBytes.
const maxProjectionListBytes = 2048

// nativeAdapter is one row of the native-skill runtime table
// (docs/policy.md, "Runtime discovery"; the reference's table).
type nativeAdapter struct {
	skillDir string   // absolute, beneath HomeDir
	env      []string // the managed environment besides HOME
}

// nativeAdapters is the closed table of native-skill runtimes: code, not
// policy, so a policy or plan can select a row but never widen one.
var nativeAdapters = map[string]nativeAdapter{
	"codex":       {skillDir: HomeDir + "/.codex/skills", env: []string{"CODEX_HOME=" + HomeDir + "/.codex"}},
	"claude-code": {skillDir: HomeDir + "/.claude/skills"},
	"pi":          {skillDir: HomeDir + "/.pi/agent/skills"},
	"copilot":     {skillDir: HomeDir + "/.copilot/skills", env: []string{"COPILOT_HOME=" + HomeDir + "/.copilot"}},
	"opencode":    {skillDir: HomeDir + "/.config/opencode/skills", env: []string{"XDG_CONFIG_HOME=" + HomeDir + "/.config"}},
}

// ExecutablePin is the identity a discovered executable was resolved
// with; the launch fails closed if the file is not that file when the
// program is about to be released.
type ExecutablePin struct {
	Path     string             `json:"path"`
	Identity discovery.Identity `json:"identity"`
	// Stage is set when the executable lies in a staged tree
	// (policy.StagedRoot of its directory): the launch then shows the
	// whole tree, and the pin covers it.
	Stage *StagePin `json:"stage,omitempty"`
}

// StagePin is the staged tree a discovered executable runs from: its
// root (DIR/<digest>) and its content digest, which PinTree checked is
// its name. A staged runtime is a unit: a native program finds its
// siblings beside it (codex runs bin/codex-code-mode-host,
// codex-path/rg, codex-resources/bwrap and reads codex-package.json), so
// the launch binds the root read-only at its own path instead of the
// executable alone, and rechecks the whole tree, through that mount,
// before the program is released.
type StagePin struct {
	Root       string `json:"root"`
	TreeDigest string `json:"tree_digest"`

	tree *stage.TreePin
}

// Projection is one library bundle projected into the sandbox, as the
// launch binding and the terminal receipt commit it: Identifier is
// "<destination>/<digest>", Target the bundle file inside the sandbox.
type Projection = receipt.Projection

// SkillProjection is what a native-skill runtime's private home holds:
// the skill entries of the projected bundles, each named by its bundle
// and its own entry digest, and the digest of the whole (SkillDigest).
type SkillProjection struct {
	Home     string       `json:"home"`
	SkillDir string       `json:"skill_dir"`
	Skills   []SkillEntry `json:"skills"`
	// Digest is SHA-256 of the canonical JSON of
	// {schema, runtime, home, skill_dir, skills}: the derived projection
	// digest.
	Digest string `json:"digest"`
}

// SkillEntry is one skill materialized into the skill directory.
type SkillEntry struct {
	Bundle      string `json:"bundle"`
	Name        string `json:"name"`
	EntryDigest string `json:"entry_digest"`
}

// SkillProjectionSchema names the projection digest's preimage.
const SkillProjectionSchema = "glove.skill-projection-v1"

// skillSource is a skill entry's content, kept until the home is filled.
type skillSource struct {
	entry *library.Entry
}

// Sources is what Resolve may read besides the policy and the plan.
type Sources struct {
	// Libraries is the pinned library bundle root (--library-bundle-root);
	// nil refuses every plan with library projections.
	Libraries *library.Root
	// Leases is the credential lease store; nil refuses every plan that
	// names a secret handle (glove run has none).
	Leases *lease.Store
}

// resolveExecutable finds a discovery template's executable and pins it.
func resolveExecutable(runtime string, searchPaths []string) (*ExecutablePin, error) {
	f, err := discovery.Find(runtime, searchPaths)
	if err != nil {
		return nil, fmt.Errorf("resolve: runtime discovery: %w", err)
	}
	pin := &ExecutablePin{Path: f.Path, Identity: f.Identity}
	if root := policy.StagedRoot(f.Dir); root != "" {
		tree, err := stage.PinTree(root)
		if err != nil {
			return nil, fmt.Errorf("resolve: runtime discovery: %w", err)
		}
		// The executable discovery pinned must be the tree's own file,
		// not something else reached by the same path.
		if !tree.HasFile(strings.TrimPrefix(f.Path, root+"/"), pin.Identity.Dev, pin.Identity.Ino) {
			return nil, fmt.Errorf("resolve: runtime discovery: %s is not a file of the stage tree %s: %w", f.Path, root, stage.ErrChanged)
		}
		pin.Stage = &StagePin{Root: root, TreeDigest: tree.Digest, tree: tree}
	}
	return pin, nil
}

// Mount is the target of the mount the pinned program runs from: the
// stage tree's root, or the executable alone.
func (pin *ExecutablePin) Mount() string {
	if pin.Stage != nil {
		return pin.Stage.Root
	}
	return pin.Path
}

// recheckExecutable is the last check of a discovered executable, once
// its mount exists: the file must still be the pinned one under the
// discovery rules (owner, mode, content hash), and the detached mount
// the program will run from must be that same inode (threat: the binary
// replaced between discovery and launch, or between the check and the
// bind).
func recheckExecutable(pin *ExecutablePin, mnt *os.File) error {
	if err := pin.Identity.Recheck(pin.Path); err != nil {
		return fmt.Errorf("recheck the discovered executable: %w", err)
	}
	if pin.Stage != nil {
		// The mount is the tree's: every entry must still be the
		// pinned one, the executable among them (HasFile at resolve).
		if pin.Stage.tree == nil {
			return fmt.Errorf("recheck the stage tree %s: not pinned: %w", pin.Stage.Root, ErrInvalid)
		}
		if err := pin.Stage.tree.Recheck(mnt); err != nil {
			return fmt.Errorf("recheck the discovered executable's stage tree: %w", err)
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(mnt.Fd()), &st); err != nil {
		return fmt.Errorf("recheck the discovered executable's mount: %w", err)
	}
	if uint64(st.Dev) != pin.Identity.Dev || st.Ino != pin.Identity.Ino || st.Size != pin.Identity.Size {
		return fmt.Errorf("recheck the discovered executable's mount: %w", discovery.ErrChanged)
	}
	return nil
}

// resolveLibraries opens and verifies every requested bundle and builds
// the library mounts, the projection list and, for a native-skill
// runtime, the skill projection.
func resolveLibraries(l *Launch, pins *Pins, src Sources, requests []libraryRequest, runtime string) error {
	if len(requests) == 0 {
		return nil
	}
	if src.Libraries == nil {
		return fmt.Errorf("resolve: library projections: no library bundle root is configured: %w", ErrUnsupported)
	}
	if len(requests) > MaxLibraryProjections {
		return fmt.Errorf("resolve: %d library projections, more than %d: %w", len(requests), MaxLibraryProjections, ErrInvalid)
	}
	byTarget := map[string]int{} // destination target → index in l.Mounts
	var skills []SkillEntry
	var sources []skillSource
	for _, r := range requests {
		b, err := src.Libraries.Open(r.digest)
		if err != nil {
			return fmt.Errorf("resolve: library bundle %s: %w", r.digest, err)
		}
		pins.bundles = append(pins.bundles, b)
		i, ok := byTarget[r.target]
		if !ok {
			i = len(l.Mounts)
			byTarget[r.target] = i
			l.Mounts = append(l.Mounts, Mount{Target: r.target, Kind: LibraryBundles, ReadOnly: true})
		}
		m := &l.Mounts[i]
		m.Bundles = append(m.Bundles, r.digest)
		m.MaxBytes += bundleSize(b)
		pr := Projection{Identifier: r.destination + "/" + r.digest,
			Destination: r.destination, Target: path.Join(r.target, r.digest), Digest: r.digest}
		if !receipt.ValidProjection(&pr) {
			return fmt.Errorf("resolve: library destination %q: its target is not a path a receipt can carry ([A-Za-z0-9._/-]): %w", r.destination, ErrInvalid)
		}
		l.Projections = append(l.Projections, pr)
		for j := range b.Manifest.Entries {
			e := &b.Manifest.Entries[j]
			if e.Kind != library.KindSkill {
				continue
			}
			skills = append(skills, SkillEntry{Bundle: r.digest, Name: e.Name, EntryDigest: e.Digest()})
			sources = append(sources, skillSource{entry: e})
		}
	}
	if n := len(strictjson.Canonical(l.Projections)); n > maxProjectionListBytes {
		return fmt.Errorf("resolve: the library projections take %d bytes in the receipt, more than %d: %w", n, maxProjectionListBytes, ErrInvalid)
	}
	// Each library tmpfs holds its bundles and a little slack for the
	// directory itself; the bundle bytes are what the quota is for.
	for i := range l.Mounts {
		if l.Mounts[i].Kind == LibraryBundles {
			l.Mounts[i].MaxBytes += 64 << 10
		}
	}
	if l.Skills == nil {
		return nil // not a native-skill runtime: skills stay in the bundle files
	}
	seen := map[string]string{}
	for _, s := range skills {
		if prev, dup := seen[s.Name]; dup {
			return fmt.Errorf("resolve: skill %q is in bundles %s and %s: %w", s.Name, prev, s.Bundle, ErrInvalid)
		}
		seen[s.Name] = s.Bundle
	}
	l.Skills.Skills = skills
	pins.skillSources = sources
	l.Skills.Digest = skillDigest(runtime, l.Skills)
	return nil
}

// libraryRequest is one plan projection with its destination's target.
type libraryRequest struct {
	digest, destination, target string
}

func bundleSize(b *library.Bundle) uint64 {
	var st unix.Stat_t
	if unix.Fstat(int(b.File.Fd()), &st) != nil || st.Size < 0 {
		return library.MaxBundleBytes
	}
	return uint64(st.Size)
}

// skillDigest is the derived projection digest.
func skillDigest(runtime string, sp *SkillProjection) string {
	pre := struct {
		Schema   string       `json:"schema"`
		Runtime  string       `json:"runtime"`
		Home     string       `json:"home"`
		SkillDir string       `json:"skill_dir"`
		Skills   []SkillEntry `json:"skills"`
	}{SkillProjectionSchema, runtime, sp.Home, sp.SkillDir, nonNil(sp.Skills)}
	sum := sha256.Sum256(strictjson.Canonical(pre))
	return hex.EncodeToString(sum[:])
}

// privateHome adds a native-skill runtime's private home to the launch:
// the mount, HOME and the managed environment. It reports false for any
// other runtime.
func privateHome(l *Launch, runtime string) bool {
	a, ok := nativeAdapters[runtime]
	if !ok {
		return false
	}
	l.Mounts = append(l.Mounts, Mount{Target: HomeDir, Kind: PrivateHome, Mode: 0o700})
	l.Env = append(l.Env, "HOME="+HomeDir)
	l.Env = append(l.Env, a.env...)
	l.Skills = &SkillProjection{Home: HomeDir, SkillDir: a.skillDir, Skills: []SkillEntry{}}
	l.Skills.Digest = skillDigest(runtime, l.Skills)
	return true
}

// fillHome creates the skill directory in the home tmpfs and expands
// every projected skill entry into it, through the tmpfs's descriptor.
func fillHome(home *os.File, l *Launch, pins *Pins) error {
	if l.Skills == nil {
		return nil
	}
	rel, ok := cutDir(l.Skills.SkillDir, l.Skills.Home)
	if !ok {
		return fmt.Errorf("private home: skill directory %q is not beneath %q: %w", l.Skills.SkillDir, l.Skills.Home, ErrInvalid)
	}
	dir, err := mkdirAll(home, rel)
	if err != nil {
		return fmt.Errorf("private home: create %s: %w", l.Skills.SkillDir, err)
	}
	defer dir.Close()
	for _, s := range pins.skillSources {
		if err := library.ExpandSkill(dir, s.entry); err != nil {
			if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
				return fmt.Errorf("%s: the private home's skills need more than its quota: %w", LimitDisk, err)
			}
			return fmt.Errorf("private home: skill %s: %w", s.entry.Name, err)
		}
	}
	return writeCredentials(home, l, pins)
}

// fillLibraries copies each verified bundle into the library tmpfs as a
// file named by its digest, hashing the bytes as they are copied: the
// file in the sandbox is exactly bytes whose hash is the digest.
func fillLibraries(dst *os.File, m Mount, pins *Pins) error {
	for _, d := range m.Bundles {
		i := -1
		if pins != nil {
			i = slices.IndexFunc(pins.bundles, func(b *library.Bundle) bool { return b.Digest == d })
		}
		if i < 0 {
			return fmt.Errorf("library bundle %s: not opened by Resolve: %w", d, ErrInvalid)
		}
		if err := copyBundle(dst, pins.bundles[i]); err != nil {
			return fmt.Errorf("library bundle %s: %w", d, err)
		}
	}
	return nil
}

func copyBundle(dst *os.File, b *library.Bundle) error {
	fd, err := unix.Openat(int(dst.Fd()), b.Digest, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	out := os.NewFile(uintptr(fd), b.Digest)
	defer out.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.NewSectionReader(b.File, 0, library.MaxBundleBytes+1))
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("%s: copy: %w", LimitDisk, err)
		}
		return fmt.Errorf("copy: %w", err)
	}
	if n > library.MaxBundleBytes || hex.EncodeToString(h.Sum(nil)) != b.Digest {
		return fmt.Errorf("the file changed after it was verified: %w", library.ErrDigest)
	}
	return out.Close()
}

// cutDir returns p relative to dir when p lies strictly beneath it.
func cutDir(p, dir string) (string, bool) {
	if len(p) <= len(dir)+1 || p[:len(dir)] != dir || p[len(dir)] != '/' {
		return "", false
	}
	return p[len(dir)+1:], true
}

// mkdirAll creates rel's components beneath dir (mode 0755), never
// following a link, and returns the last one opened.
func mkdirAll(dir *os.File, rel string) (*os.File, error) {
	cur := int(dir.Fd())
	owned := -1
	for _, c := range splitPath(rel) {
		if err := unix.Mkdirat(cur, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			if owned >= 0 {
				unix.Close(owned)
			}
			return nil, err
		}
		next, err := unix.Openat2(cur, c, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if owned >= 0 {
			unix.Close(owned)
		}
		if err != nil {
			return nil, err
		}
		cur, owned = next, next
	}
	if owned < 0 {
		return nil, fmt.Errorf("empty path: %w", ErrInvalid)
	}
	return os.NewFile(uintptr(owned), rel), nil
}

func splitPath(p string) []string {
	var out []string
	for len(p) > 0 {
		i := 0
		for i < len(p) && p[i] != '/' {
			i++
		}
		if i > 0 {
			out = append(out, p[:i])
		}
		if i == len(p) {
			break
		}
		p = p[i+1:]
	}
	return out
}
