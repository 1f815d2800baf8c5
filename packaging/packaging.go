// SPDX-License-Identifier: Apache-2.0

// Package packaging builds Glove's distribution package from the
// capability table: where each executable goes and with which mode
// (Stage), the postinst lines that give every helper its group, mode and
// file capabilities (Postinst), and the supervisor unit's capability
// bounding set (BoundingSet). debian/rules drives it through
// cmd/glove-deb; docs/packaging.md describes the result.
//
// The archive itself holds every file root:root with no file capability
// (a Debian archive carries neither a group that may not exist yet nor
// extended attributes): the helpers are shipped 0750 root:root and
// postinst, once the service group exists, makes them root:glove 0750 and
// runs setcap with exactly the table's row, as packages such as
// iputils-ping do for their file capabilities.
package packaging

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
)

// Group is the service group and user the package creates.
const Group = "glove"

// Marker is the line of postinst.in that Postinst replaces with one
// glove_helper line per helper row of the capability table.
const Marker = "#@GLOVE_HELPERS@"

// NoCaps is how a glove_helper line says that a helper holds no
// capability (setcap is not run; the file carries no
// security.capability attribute).
const NoCaps = "-"

// Mode is the mode of an executable in the archive and after postinst.
// Neither ever carries setuid or setgid.
func Mode(e captable.Entry) os.FileMode {
	if e.Helper {
		return 0o750
	}
	return 0o755
}

// InstalledPath is where an entry is installed under prefix (e.g. /usr).
func InstalledPath(prefix string, e captable.Entry) string {
	return filepath.Join(prefix, e.Dir, e.Binary)
}

// HelperLines are the postinst's per-helper lines, one for each helper
// row, in the table's order: `glove_helper PATH CAPS`, where CAPS is the
// row's setcap(8) text or NoCaps.
func HelperLines(prefix string) []string {
	var out []string
	for _, e := range captable.Table {
		if !e.Helper {
			continue
		}
		caps := captext.SetcapText(e)
		if caps == "" {
			caps = NoCaps
		}
		out = append(out, fmt.Sprintf("glove_helper %s %s", InstalledPath(prefix, e), caps))
	}
	return out
}

// Postinst returns the template with its Marker line replaced by
// HelperLines. The marker must appear exactly once, on a line of its own.
func Postinst(template, prefix string) (string, error) {
	lines := strings.Split(template, "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == Marker {
			if at >= 0 {
				return "", fmt.Errorf("postinst template: %s appears more than once", Marker)
			}
			at = i
		} else if strings.Contains(l, Marker) {
			return "", fmt.Errorf("postinst template: %s must be on a line of its own", Marker)
		}
	}
	if at < 0 {
		return "", fmt.Errorf("postinst template: no %s line", Marker)
	}
	indent := lines[at][:len(lines[at])-len(strings.TrimLeft(lines[at], " \t"))]
	out := append([]string{}, lines[:at]...)
	for _, l := range HelperLines(prefix) {
		out = append(out, indent+l)
	}
	out = append(out, lines[at+1:]...)
	return strings.Join(out, "\n"), nil
}

// BoundingSet is the union of every row's capabilities in systemd's
// spelling (CAP_SYS_ADMIN), sorted: the supervisor unit's
// CapabilityBoundingSet. The helpers gain their capabilities from file
// capabilities at execve, which the bounding set of the process that
// executes them limits, so this is exactly what the service may keep.
func BoundingSet() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range captable.Table {
		for _, c := range e.Caps {
			n := strings.ToUpper(c.Name)
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Stage copies every executable of the table from binDir into root (the
// package's file tree) under prefix, with Mode: 0750 for helpers, 0755
// otherwise, whatever the umask. Ownership is left to dpkg-deb, which
// debhelper runs with --root-owner-group (Rules-Requires-Root: no).
func Stage(binDir, root, prefix string) error {
	if !filepath.IsAbs(prefix) {
		return fmt.Errorf("stage: prefix %q is not absolute", prefix)
	}
	for _, e := range captable.Table {
		dst := filepath.Join(root, InstalledPath(prefix, e))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("stage %s: %w", e.Binary, err)
		}
		if err := copyFile(filepath.Join(binDir, e.Binary), dst, Mode(e)); err != nil {
			return fmt.Errorf("stage %s: %w", e.Binary, err)
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil { // umask-proof, never setuid/setgid
		out.Close()
		return err
	}
	return out.Close()
}
