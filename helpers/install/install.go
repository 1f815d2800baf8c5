// SPDX-License-Identifier: Apache-2.0

// Package install places the built executables under a prefix with the
// modes, owners and file capabilities of the capability table. It is the
// one installer: `make install`, the test environment and packaging use
// it, so what the tests check is what operators get.
//
// Every file is written to a temporary name beside its destination,
// given its owner, mode and capabilities, and renamed over the
// destination: installing twice leaves the same result, and a reader
// never sees a half-written helper or one without its capabilities.
package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
)

// Options says what to install where.
type Options struct {
	// BinDir holds the built executables (the Makefile's bin/).
	BinDir string
	// Prefix is the installed prefix, e.g. /usr/local.
	Prefix string
	// DestDir is prepended to every destination (staging for packages).
	DestDir string
	// Group is the service group that may execute the helpers.
	Group string
}

// setcapPaths are where Debian's libcap2-bin puts setcap. It is looked up
// in fixed places, not on PATH: the installer runs as root.
var setcapPaths = []string{"/usr/sbin/setcap", "/sbin/setcap"}

// Install installs every row of the capability table.
func Install(o Options) error {
	if !filepath.IsAbs(o.Prefix) {
		return fmt.Errorf("install: prefix %q is not absolute", o.Prefix)
	}
	gid, err := lookupGroup(o.Group)
	if err != nil {
		return err
	}
	setcap, err := findSetcap()
	if err != nil {
		return err
	}
	for _, e := range captable.Table {
		if err := installOne(o, e, gid, setcap); err != nil {
			return err
		}
	}
	return nil
}

// Path is where an entry is installed.
func Path(o Options, e captable.Entry) string {
	return filepath.Join(o.DestDir, o.Prefix, e.Dir, e.Binary)
}

func installOne(o Options, e captable.Entry, gid int, setcap string) error {
	src := filepath.Join(o.BinDir, e.Binary)
	dst := Path(o, e)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("install %s: create directory: %w", e.Binary, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("install %s: open built file: %w", e.Binary, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+e.Binary+".new-*")
	if err != nil {
		return fmt.Errorf("install %s: create temporary file: %w", e.Binary, err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmpName)
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: copy: %w", e.Binary, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: sync: %w", e.Binary, err)
	}
	owner, mode := 0, os.FileMode(0o755)
	if e.Helper {
		owner, mode = gid, 0o750
	}
	// chown before setcap: the kernel clears file capabilities on chown.
	// The explicit mode never carries setuid or setgid bits.
	if err := tmp.Chown(0, owner); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: chown: %w", e.Binary, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: chmod: %w", e.Binary, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install %s: close: %w", e.Binary, err)
	}
	if text := captext.SetcapText(e); text != "" {
		out, err := exec.Command(setcap, text, tmpName).CombinedOutput()
		if err != nil {
			return fmt.Errorf("install %s: setcap %s: %w: %s", e.Binary, text, err, out)
		}
	}
	if err := os.Rename(tmpName, dst); err != nil {
		return fmt.Errorf("install %s: rename into place: %w", e.Binary, err)
	}
	ok = true
	return nil
}

func lookupGroup(name string) (int, error) {
	if name == "" {
		return 0, errors.New("install: no service group given")
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("install: service group %q: %w (create it: scripts/create-group.sh %s)", name, err, name)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("install: service group %q has gid %q: %w", name, g.Gid, err)
	}
	return gid, nil
}

func findSetcap() (string, error) {
	for _, p := range setcapPaths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("install: setcap not found in %v (apt-get install libcap2-bin, or scripts/install-deps.sh)", setcapPaths)
}
