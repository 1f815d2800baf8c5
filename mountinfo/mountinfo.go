// SPDX-License-Identifier: Apache-2.0

// Package mountinfo parses the kernel's /proc/PID/mountinfo, once for
// every reader in the repository (glove-loopext4, gloved, glove status,
// the tests and the VM lane's guest), so that all of them read a line the
// same way.
//
// A line is: id, parent id, major:minor, root, mount point, mount
// options, optional fields, "-", file system type, source, super
// options (proc(5)). Root, mount point and source keep the kernel's
// octal escapes (\040 for a space); Unescape undoes them.
package mountinfo

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Entry is one mount.
type Entry struct {
	ID, Parent   uint64
	Root, Point  string // escaped
	Options      string // the mount's own options (rw, nosuid, ...)
	FSType       string
	Source       string // escaped
	SuperOptions string // the file system's options
}

// Parse returns the entries of a mountinfo text. A line that is not one
// (too few fields, no separator after the fixed fields, ids that are not
// numbers) is skipped, so a truncated last line never yields an entry.
func Parse(text string) []Entry {
	var out []Entry
	for _, line := range strings.Split(text, "\n") {
		if e, ok := parseLine(line); ok {
			out = append(out, e)
		}
	}
	return out
}

func parseLine(line string) (Entry, bool) {
	f := strings.Fields(line)
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || sep+2 >= len(f) {
		return Entry{}, false
	}
	id, err1 := strconv.ParseUint(f[0], 10, 64)
	parent, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return Entry{}, false
	}
	e := Entry{ID: id, Parent: parent, Root: f[3], Point: f[4], Options: f[5], FSType: f[sep+1], Source: f[sep+2]}
	if sep+3 < len(f) {
		e.SuperOptions = f[sep+3]
	}
	return e, true
}

// Read reads and parses a mountinfo file, refusing one of more than max
// bytes (max 0: no bound).
func Read(path string, max int) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var r io.Reader = f
	if max > 0 {
		r = io.LimitReader(f, int64(max)+1)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if max > 0 && len(data) > max {
		return nil, fmt.Errorf("read %s: more than %d bytes", path, max)
	}
	return Parse(string(data)), nil
}

// Escaped reports whether a field holds one of the kernel's escapes.
func Escaped(s string) bool { return strings.Contains(s, `\`) }

// Unescape undoes the kernel's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !Escaped(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupFlags are the super options of a v1 cgroup mount that are not
// controllers.
var cgroupFlags = map[string]bool{"rw": true, "ro": true, "clone_children": true, "noprefix": true,
	"xattr": true, "cpuset_v2_mode": true, "favordynmods": true}

// CgroupControllers lists the controllers a v1 cgroup mount holds, from
// its super options (nil for any other mount).
func (e Entry) CgroupControllers() []string {
	if e.FSType != "cgroup" {
		return nil
	}
	var out []string
	for _, o := range strings.Split(e.SuperOptions, ",") {
		if o != "" && !cgroupFlags[o] && !strings.Contains(o, "=") {
			out = append(out, o)
		}
	}
	return out
}
