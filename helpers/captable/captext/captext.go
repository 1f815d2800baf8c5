// SPDX-License-Identifier: Apache-2.0

// Package captext renders the capability table (helpers/captable) as
// text: the setcap(8) argument of a row, masks as /proc/PID/status prints
// them, the lines scripts read (glove captable --fields) and SECURITY.md's
// table. The helpers do not link it: they need the rows, not their text.
package captext

import (
	"fmt"
	"sort"
	"strings"

	"github.com/glove-sandbox/glove/helpers/captable"
)

// SetcapText is the argument setcap(8) takes for a row, or "" when the
// row has no capability (such files carry no security.capability xattr).
// Capabilities are permitted and effective ("=ep") and never inheritable:
// an inheritable bit would let the capability pass to programs the helper
// executes (mkfs.ext4), which must run without it.
func SetcapText(e captable.Entry) string {
	if len(e.Caps) == 0 {
		return ""
	}
	names := make([]string, len(e.Caps))
	for i, c := range e.Caps {
		names[i] = c.Name
	}
	sort.Strings(names)
	return strings.Join(names, ",") + "=ep"
}

// MaskString formats a mask the way /proc/PID/status prints it.
func MaskString(m uint64) string { return fmt.Sprintf("%016x", m) }

// Fields renders the table for scripts (setup-host.sh): one line a row,
// space-separated, no field containing a space: the executable, its
// directory below the prefix, its mode, owner:group, its bounds file
// ("-" for none) and its setcap(8) text ("none" for none).
func Fields() string {
	var b strings.Builder
	for _, e := range captable.Table {
		mode, owner := "0755", "root:root"
		if e.Helper {
			mode, owner = "0750", "root:glove"
		}
		bounds, caps := e.Bounds, SetcapText(e)
		if bounds == "" {
			bounds = "-"
		}
		if caps == "" {
			caps = "none"
		}
		fmt.Fprintf(&b, "%s %s %s %s %s %s\n", e.Binary, e.Dir, mode, owner, bounds, caps)
	}
	return b.String()
}

// Markdown renders the table for SECURITY.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| executable | installed in | mode | bounds | protocol | file capabilities | CapPrm mask; CapEff while serving | why |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, e := range captable.Table {
		mode := "0755 root:root"
		if e.Helper {
			mode = "0750 root:glove"
		}
		caps := SetcapText(e)
		if caps == "" {
			caps = "none"
		}
		masks := "`" + MaskString(e.Mask()) + "`"
		if e.Effective() != e.Mask() {
			masks += "; `" + MaskString(e.Effective()) + "` (raised per call)"
		}
		bounds := "—"
		if e.Bounds != "" {
			bounds = "`$CONFDIR/" + e.Bounds + "`"
		}
		proto := "—"
		if e.Protocol != "" {
			proto = "`" + e.Protocol + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `$PREFIX/%s` | %s | %s | %s | `%s` | %s | %s |\n",
			e.Binary, e.Dir, mode, bounds, proto, caps, masks, e.Why)
	}
	return b.String()
}
