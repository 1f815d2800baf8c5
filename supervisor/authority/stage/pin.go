// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
)

// ErrChanged is wrapped when a staged tree is not what its name says, or
// no longer the tree that was pinned. It wraps discovery.ErrChanged: to
// gloved, a changed tree is a changed runtime (reason runtime_changed).
var ErrChanged = fmt.Errorf("stage: staged tree changed (%w)", discovery.ErrChanged)

// TreePin is a staged tree DIR/<digest> as a launch pins it: verified,
// when pinned, to have the content digest its name says, with the
// identity of its root and of every entry (kind, path, device, inode,
// size, mode, modification and change times).
//
// Threat: the tree replaced or changed between the session's resolution
// and the program's release (a concurrent restage, an edit, a rename of
// another tree over it), so that the program runs something other than
// what the adapter digest and the receipt name. Recheck compares the
// tree the program will see, through its own mount, with the pin.
type TreePin struct {
	Root   string // DIR/<digest>, canonical
	Digest string // the content digest, equal to the name
	Files  int64
	Bytes  int64

	dev, ino uint64
	entries  []Entry
}

// PinTree opens root (a canonical DIR/<digest>, DIR under the discovery
// directory rules), hashes the whole tree and checks that its content
// digest is its name.
func PinTree(root string) (*TreePin, error) {
	if !isCanonical(root) || policy.StagedRoot(root) != root {
		return nil, fmt.Errorf("stage tree %q: not a canonical DIR/<digest> path", root)
	}
	dir, name := filepath.Split(root)
	d, err := discovery.OpenDirectory(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("stage tree %s: %w", root, err)
	}
	defer d.Close()
	t, err := openTree(int(d.Fd()), name, root, nil)
	if err != nil {
		return nil, fmt.Errorf("stage tree %s: %w", root, err)
	}
	defer t.Close()
	if t.Digest != name {
		return nil, fmt.Errorf("%w: %s has content digest %s, not its name (changed since it was staged; stage it again)", ErrChanged, root, t.Digest)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(t.root.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stage tree %s: %w", root, err)
	}
	return &TreePin{Root: root, Digest: t.Digest, Files: t.Files, Bytes: t.Bytes,
		dev: uint64(st.Dev), ino: st.Ino, entries: t.Entries}, nil
}

// HasFile reports whether rel is a regular file of the pinned tree with
// that device and inode (the executable discovery pinned in it).
func (p *TreePin) HasFile(rel string, dev, ino uint64) bool {
	i := slices.IndexFunc(p.entries, func(e Entry) bool { return e.Path == rel })
	return i >= 0 && p.entries[i].Kind == File && p.entries[i].dev == dev && p.entries[i].ino == ino
}

// Recheck walks the tree through mnt, the detached read-only mount of
// Root the program will run from, and fails with ErrChanged unless its
// root and every entry have the pinned identity. Content is not hashed
// again: a write or truncation sets a file's mtime and ctime, a chmod,
// chown or link its ctime, and ctime cannot be set back by any user but
// one who can set the clock; a replaced file has another inode, a
// replaced tree another root. (The executable itself is re-hashed by its
// discovery pin's own recheck.)
func (p *TreePin) Recheck(mnt *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(mnt.Fd()), &st); err != nil {
		return fmt.Errorf("recheck stage tree %s: %w", p.Root, err)
	}
	if uint64(st.Dev) != p.dev || st.Ino != p.ino {
		return fmt.Errorf("%w: %s: its mount is not the pinned tree (replaced since the session was resolved)", ErrChanged, p.Root)
	}
	fd, err := open2(int(mnt.Fd()), ".", unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
	if err != nil {
		return fmt.Errorf("recheck stage tree %s: open: %w", p.Root, err)
	}
	t := &Tree{Source: p.Root, label: p.Root, root: os.NewFile(uintptr(fd), p.Root), dev: p.dev}
	defer t.Close()
	if err := t.scan(); err != nil {
		return fmt.Errorf("recheck stage tree %s: %w", p.Root, err)
	}
	if len(t.Entries) != len(p.entries) {
		return fmt.Errorf("%w: %s: %d entries, pinned %d", ErrChanged, p.Root, len(t.Entries), len(p.entries))
	}
	for i := range t.Entries {
		a, b := &t.Entries[i], &p.entries[i]
		if a.Kind != b.Kind || a.Path != b.Path || a.Exec != b.Exec || a.Size != b.Size || a.Target != b.Target ||
			a.dev != b.dev || a.ino != b.ino || a.mode != b.mode || a.mtime != b.mtime || a.ctime != b.ctime {
			return fmt.Errorf("%w: %s: %s is not the pinned %s", ErrChanged, p.Root, b.Path, b.Kind)
		}
	}
	return nil
}
