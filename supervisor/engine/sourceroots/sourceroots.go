// SPDX-License-Identifier: Apache-2.0

// Package sourceroots tells, before any launch, whether glove-mounter
// will bind a host path: a bind source must lie beneath one of the
// source_roots of its root-owned bounds file (mounter.json in the
// helpers' configuration directory), on that root's mount.
//
// The helper decides, by identity, at every launch (helpers/mounter,
// bind.go); this package only reads the same file under the same rules
// and makes the same comparison by path, so that `glove policy stage`,
// `detect`, `generate` and `policy validate` can say at once what the
// first launch would otherwise fail with (exit 125, "glove-mounter
// bind: source is outside every source root"; issue 32).
package sourceroots

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/trustpath"
)

// Roots are glove-mounter's source roots as its bounds file lists them.
type Roots struct {
	File  string   // the bounds file they were read from
	Roots []string // as configured
	canon []string // each with its symbolic links resolved, as the helper opens it
}

// Installed reads the bounds of the installed glove-mounter: the file in
// helperkit.ConfigDir (fixed at build time, as the helper's own), owned
// by root all the way down.
func Installed() (*Roots, error) {
	return Load(helperkit.ConfigDir, 0)
}

// Load reads dir's mounter bounds file, every directory down to it and
// the file owned by owner and writable by nobody else.
func Load(dir string, owner uint32) (*Roots, error) {
	name := captable.MustLookup(mounter.Name).Bounds
	file := filepath.Join(dir, name)
	// The helper's own rules (helperkit's loader, which is the helper's
	// code and stays out of this command): every directory down and the
	// file owned by owner, writable by nobody else, no symbolic link;
	// strict decoding; the bounds validated.
	root, err := os.Open("/")
	if err != nil {
		return nil, fmt.Errorf("read glove-mounter's bounds: open /: %w", err)
	}
	defer root.Close()
	var cfg mounter.Config
	data, err := trustpath.ReadFile(root, file, owner, helperkit.MaxConfigBytes)
	if err == nil {
		err = helperkit.DecodeStrict(data, &cfg)
	}
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("read glove-mounter's bounds %s: %w", file, err)
	}
	r := &Roots{File: file, Roots: cfg.SourceRoots}
	for _, p := range cfg.SourceRoots {
		c, err := filepath.EvalSymlinks(p)
		if err != nil {
			// The helper refuses to start without every root.
			return nil, fmt.Errorf("glove-mounter's source root %s (%s): %w", p, file, err)
		}
		r.canon = append(r.canon, c)
	}
	return r, nil
}

// New is Roots for a list of canonical roots (tests).
func New(file string, roots []string) *Roots {
	return &Roots{File: file, Roots: roots, canon: roots}
}

// Describe is the roots and their file, for a message.
func (r *Roots) Describe() string {
	return fmt.Sprintf("%s in %s", strings.Join(r.Roots, ", "), r.File)
}

// ErrOutside is wrapped when a path is not where glove-mounter binds from.
var ErrOutside = errors.New("outside glove-mounter's source roots")

// Check returns the source root p lies beneath, or an error wrapping
// ErrOutside when it lies beneath none, or beneath one but on another
// mount than the root's (the helper's walk up from the source must stay
// on the root's mount). A path that does not exist (yet) is compared as
// written.
func (r *Roots) Check(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path", p)
	}
	canon, err := filepath.EvalSymlinks(p)
	exists := err == nil
	if errors.Is(err, os.ErrNotExist) {
		canon, err = filepath.Clean(p), nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	for i, root := range r.canon {
		if !beneath(canon, root) {
			continue
		}
		if exists {
			if err := sameMount(canon, root); err != nil {
				return "", fmt.Errorf("%s lies beneath glove-mounter's source root %s but %w (%s): a launch could not bind it", p, r.Roots[i], err, r.File)
			}
		}
		return r.Roots[i], nil
	}
	return "", fmt.Errorf("%s is %w (%s): a launch could not bind it", p, ErrOutside, r.Describe())
}

func beneath(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// sameMount checks that p and every directory above it up to root are
// on root's mount.
func sameMount(p, root string) error {
	want, err := mountID(root)
	if err != nil {
		return err
	}
	for cur := p; ; cur = filepath.Dir(cur) {
		id, err := mountID(cur)
		if err != nil {
			return err
		}
		if id != want {
			return fmt.Errorf("%s is on another mount than the root's", cur)
		}
		if cur == root || cur == "/" {
			return nil
		}
	}
}

func mountID(p string) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, fmt.Errorf("statx %s: %w", p, err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx %s: no mount id", p)
	}
	return stx.Mnt_id, nil
}
