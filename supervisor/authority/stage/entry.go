// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
)

// This file finds a closure's entry point and decides whether it can run
// on its own inside a sandbox. A staged runtime is launched as a unit: the
// sandbox shows the staged tree and nothing else of the host but what the
// template grants, so an entry point that needs a program outside the
// tree to start (a script's interpreter) would fail with "execve: no such
// file or directory" at the first launch, after everything was approved.
// Such a closure is refused here, with the package to stage instead.

// VendorDir is the directory of an npm platform package that holds one
// subdirectory per target ("vendor/<target>/bin/EXE", the layout of
// @openai/codex's platform packages).
const VendorDir = "vendor"

// maxShebang bounds the "#!" line read from a script entry point (the
// kernel reads at most 256 bytes of it).
const maxShebang = 256

// maxPackageJSON bounds a package.json read for a hint.
const maxPackageJSON = 1 << 20

// entryCandidates are the entry point rules, in order: bin/EXE, EXE, and
// an npm platform package's vendor/<target>/bin/EXE when exactly one
// target has it.
func entryCandidates(entries []Entry, exe string) ([]string, error) {
	out := []string{"bin/" + exe, exe}
	var vendored []string
	for _, e := range entries {
		parts := strings.Split(e.Path, "/")
		if len(parts) == 4 && parts[0] == VendorDir && parts[2] == "bin" && parts[3] == exe {
			vendored = append(vendored, e.Path)
		}
	}
	if len(vendored) > 1 {
		return out, fmt.Errorf("%d entry points %s: one target per stage (stage the one of this machine's directory %s/<target>)", len(vendored), strings.Join(vendored, ", "), VendorDir)
	}
	return append(out, vendored...), nil
}

// findEntryPoint sets t.EntryPoint by the rules of entryCandidates and
// checks it is an executable this machine runs without anything outside
// the tree (checkNative).
func (t *Tree) findEntryPoint(exe string) error {
	cands, err := entryCandidates(t.Entries, exe)
	if err != nil {
		return fmt.Errorf("%s: %w", t.Source, err)
	}
	for _, rel := range cands {
		i := slices.IndexFunc(t.Entries, func(e Entry) bool { return e.Path == rel })
		if i < 0 {
			continue
		}
		e := &t.Entries[i]
		if e.Kind != File {
			return fmt.Errorf("entry point %s in %s is a %s, not a regular executable file", rel, t.Source, e.Kind)
		}
		if !e.Exec {
			return fmt.Errorf("entry point %s in %s is not executable", rel, t.Source)
		}
		t.EntryPoint = rel
		return t.checkNative(e, exe)
	}
	msg := fmt.Sprintf("no entry point bin/%s or %s in %s", exe, exe, t.Source)
	if h := platformHint(t.Source, exe); h != "" {
		return errors.New(msg + "; " + h)
	}
	return errors.New(msg)
}

// checkNative reads the entry point's first bytes: an ELF executable of
// this machine is accepted (its program interpreter, if any, is reported
// in t.Interpreter: it comes from the host); a script is refused, naming
// the platform package that holds the native program when the script
// belongs to an npm package with one; anything else is refused.
func (t *Tree) checkNative(e *Entry, exe string) error {
	f, err := t.openFile(e)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, maxShebang)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: read: %w", f.Name(), err)
	}
	head = head[:n]
	where := fmt.Sprintf("entry point %s in %s", t.EntryPoint, t.Source)
	if t.single {
		where = "entry point " + t.Source
	}
	switch {
	case bytes.HasPrefix(head, []byte(elf.ELFMAG)):
		interp, err := elfInterpreter(f)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		t.Interpreter = interp
		return nil
	case bytes.HasPrefix(head, []byte("#!")):
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		shebang := strings.TrimSpace(string(line))
		msg := fmt.Sprintf("%s is a script (#!%s) whose interpreter is not in the stage, and Glove stages no interpreter", where, shebang)
		// The script's package: the source itself, or for a single file
		// the nearest directory above it with a package.json.
		pkg := t.Source
		if t.single {
			pkg = packageRoot(filepath.Dir(t.Source))
		}
		if h := platformHint(pkg, exe); h != "" {
			return errors.New(msg + "; " + h)
		}
		return errors.New(msg + ": stage the native executable, or launch the interpreter as a pinned executable_path with the script's package in read_only_paths")
	}
	return fmt.Errorf("%s is neither an ELF executable nor a script; not staged", where)
}

// hostMachine is the ELF machine this binary runs on.
func hostMachine() (elf.Machine, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64, true
	case "arm64":
		return elf.EM_AARCH64, true
	case "386":
		return elf.EM_386, true
	case "riscv64":
		return elf.EM_RISCV, true
	}
	return 0, false
}

// elfInterpreter checks that f is an executable ELF file for this
// machine and returns its program interpreter (PT_INTERP), "" for a
// static executable. Threat: a platform package of another machine
// staged by mistake would be admitted and fail at every launch with
// "exec format error".
func elfInterpreter(f *os.File) (string, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", fmt.Errorf("not a readable ELF file: %w", err)
	}
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return "", fmt.Errorf("an ELF file of type %s, not an executable", ef.Type)
	}
	if m, ok := hostMachine(); ok && ef.Machine != m {
		return "", fmt.Errorf("an ELF executable for %s; this machine is %s (stage the platform package of this machine)", ef.Machine, m)
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		if p.Filesz == 0 || p.Filesz > 4096 {
			return "", fmt.Errorf("program interpreter of %d bytes", p.Filesz)
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("read the program interpreter: %w", err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// packageRoot returns the nearest of dir and its ancestors that holds a
// package.json, or "" (looking at most 8 levels up, never into a harness
// home).
func packageRoot(dir string) string {
	for range 8 {
		if harnessComponent(dir) != "" {
			return ""
		}
		if fi, err := os.Lstat(filepath.Join(dir, "package.json")); err == nil && fi.Mode().IsRegular() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
	return ""
}

// npmArch is npm's name of this machine's architecture.
func npmArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x64"
	case "386":
		return "ia32"
	}
	return runtime.GOARCH
}

// PlatformPackage is the per-platform package an npm package ships its
// native program in (an optionalDependencies entry named for this
// machine, e.g. @openai/codex-linux-x64), as found from the package.
type PlatformPackage struct {
	Name   string // the dependency name, e.g. "@openai/codex-linux-x64"
	Dir    string // where it is installed, "" when it is not
	Binary string // the native program in Dir, "" when not found
}

// FindPlatformPackage reads pkgDir/package.json and returns the
// optionalDependencies entry for this machine (linux and npm's name of
// its architecture: "<name>-linux-x64", or with a libc suffix such as
// "-musl" when no plain one is installed), resolved as node does: in
// pkgDir/node_modules, then in every node_modules directory above
// pkgDir. It reports false when the package names none. Nothing it reads
// decides what is staged: it only words a refusal.
func FindPlatformPackage(pkgDir, exe string) (PlatformPackage, bool) {
	if pkgDir == "" || harnessComponent(pkgDir) != "" {
		return PlatformPackage{}, false
	}
	f, err := os.Open(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return PlatformPackage{}, false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPackageJSON))
	if err != nil {
		return PlatformPackage{}, false
	}
	var pj struct {
		OptionalDependencies map[string]any `json:"optionalDependencies"`
	}
	if err := json.Unmarshal(data, &pj, json.RejectUnknownMembers(false)); err != nil {
		return PlatformPackage{}, false
	}
	plain := "-linux-" + npmArch()
	var names []string
	for name := range pj.OptionalDependencies {
		base := path.Base(name)
		if strings.HasSuffix(base, plain) || strings.Contains(base, plain+"-") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return PlatformPackage{}, false
	}
	// The plain name first (glibc or static), then the suffixed ones.
	slices.SortFunc(names, func(a, b string) int {
		if pa, pb := strings.HasSuffix(a, plain), strings.HasSuffix(b, plain); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		if dir := resolveModule(pkgDir, name); dir != "" {
			return PlatformPackage{Name: name, Dir: dir, Binary: nativeIn(dir, exe)}, true
		}
	}
	return PlatformPackage{Name: names[0]}, true
}

// resolveModule finds the installed package name from pkgDir the way
// node's resolution does, or "".
func resolveModule(pkgDir, name string) string {
	try := func(nm string) string {
		d := filepath.Join(nm, filepath.FromSlash(name))
		if fi, err := os.Stat(filepath.Join(d, "package.json")); err == nil && fi.Mode().IsRegular() {
			return d
		}
		return ""
	}
	if d := try(filepath.Join(pkgDir, "node_modules")); d != "" {
		return d
	}
	for dir := pkgDir; ; {
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
		if filepath.Base(dir) == "node_modules" {
			if d := try(dir); d != "" {
				return d
			}
		}
	}
}

// nativeIn applies the entry point rules to an installed platform
// package without walking it: the first of bin/EXE, EXE and
// vendor/<target>/bin/EXE that is a regular file.
func nativeIn(dir, exe string) string {
	cands := []string{"bin/" + exe, exe}
	if ents, err := os.ReadDir(filepath.Join(dir, VendorDir)); err == nil {
		for _, e := range ents {
			cands = append(cands, VendorDir+"/"+e.Name()+"/bin/"+exe)
		}
	}
	for _, c := range cands {
		p := filepath.Join(dir, filepath.FromSlash(c))
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// platformHint words where the native program of the npm package at
// pkgDir is, or "" when it names no platform package.
func platformHint(pkgDir, exe string) string {
	pp, ok := FindPlatformPackage(pkgDir, exe)
	if !ok {
		return ""
	}
	switch {
	case pp.Dir == "":
		return fmt.Sprintf("the native binary is in the platform package %s, which is not installed beside it: install it, then stage its directory", pp.Name)
	case pp.Binary == "":
		return fmt.Sprintf("the native binary should be in the platform package %s (%s), which has no %s: stage the package of this machine", pp.Name, pp.Dir, exe)
	}
	return fmt.Sprintf("the native binary is in the platform package %s (%s): stage that (--source %s)", pp.Name, pp.Binary, pp.Dir)
}
