// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
)

// The lines of packaging/rpm/glove.spec between which RPMFileLines stand.
// The block is committed (rpmbuild reads the spec as it is, without
// running Go at parse time); TestRPMSpecMatchesTable fails when it and the
// capability table differ, and `glove-deb rpm-files -spec FILE -write`
// rewrites it.
const (
	RPMBegin = "# BEGIN glove-deb rpm-files: generated from helpers/captable, do not edit"
	RPMEnd   = "# END glove-deb rpm-files"
)

// RPMPrefix is the prefix the spec's file lines name: the macro, which is
// /usr on every RPM distribution, and the PREFIX the spec builds with.
const RPMPrefix = "%{_prefix}"

// RPMFileLines are the spec's %files lines for the executables of the
// capability table, in its order: each with the owner, group and mode of
// Mode (a helper root:glove 0750, anything else root:root 0755) and, for
// a helper with capabilities, %caps with exactly its setcap(8) text. An
// RPM header carries both the group and the file capabilities, so rpm
// applies them as it writes the file and no scriptlet runs chown or
// setcap (unlike the .deb's postinst). No line may carry setuid or
// setgid: Mode never does.
func RPMFileLines(prefix string) []string {
	var out []string
	for _, e := range captable.Table {
		group := "root"
		if e.Helper {
			group = Group
		}
		line := fmt.Sprintf("%%attr(%04o,root,%s) ", Mode(e).Perm(), group)
		if caps := captext.SetcapText(e); caps != "" {
			line += "%caps(" + caps + ") "
		}
		out = append(out, line+InstalledPath(prefix, e))
	}
	return out
}

// RPMSpec returns the spec with the lines between RPMBegin and RPMEnd
// replaced by RPMFileLines(RPMPrefix). Each marker must appear exactly
// once, on a line of its own, RPMBegin first.
func RPMSpec(spec string) (string, error) {
	lines := strings.Split(spec, "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch strings.TrimSpace(l) {
		case RPMBegin:
			if begin >= 0 {
				return "", fmt.Errorf("rpm spec: %q appears more than once", RPMBegin)
			}
			begin = i
		case RPMEnd:
			if end >= 0 {
				return "", fmt.Errorf("rpm spec: %q appears more than once", RPMEnd)
			}
			end = i
		}
	}
	if begin < 0 || end < 0 || end < begin {
		return "", fmt.Errorf("rpm spec: no %q line followed by a %q line", RPMBegin, RPMEnd)
	}
	out := append([]string{}, lines[:begin+1]...)
	out = append(out, RPMFileLines(RPMPrefix)...)
	out = append(out, lines[end:]...)
	return strings.Join(out, "\n"), nil
}
