// SPDX-License-Identifier: Apache-2.0

// Package captable is the one table of which installed Glove executable
// holds which Linux capabilities.
//
// Everything that grants or checks a capability reads this table: the
// installer sets file capabilities from it with setcap, each helper drops
// to exactly its row before serving, the integration tests compare every
// helper thread's CapEff/CapPrm with it, and SECURITY.md's table is
// generated from it (captext; a test fails when the document and the
// table differ). Changing a row is a security decision: update SECURITY.md
// in the same commit (go test ./helpers/helperkit -run TestSecurityDoc -update).
package captable

import "golang.org/x/sys/unix"

// Cap is one Linux capability: its setcap(8) spelling and its number.
type Cap struct {
	Name string
	Bit  uint
}

// The capabilities any row may name. Keeping the vocabulary this small
// means a typo cannot silently grant something else.
var (
	SysAdmin    = Cap{"cap_sys_admin", unix.CAP_SYS_ADMIN}
	DACOverride = Cap{"cap_dac_override", unix.CAP_DAC_OVERRIDE}
)

// Where an installed executable lives below the install prefix.
const (
	DirBin     = "bin"
	DirLibexec = "libexec/glove"
)

// Entry is one installed executable and the capabilities it holds.
type Entry struct {
	Binary string // the executable's file name, also its wire protocol name
	Dir    string // DirBin or DirLibexec
	// Helper: spawned by the supervisor over a socketpair, installed mode
	// 0750 and group-owned by the service group, so only it can execute it.
	Helper bool
	// StartedBy names the helper that starts this one itself (from a
	// descriptor of the file next to its own); the supervisor never
	// spawns it, nor asks it Hello.
	StartedBy string
	Bounds    string // a helper's bounds file under the configuration directory (helperkit.ConfigDir), root's, read at start-up
	Protocol  string // the package declaring a helper's protocol (its wire.Protocol, named Binary), relative to the module
	Caps      []Cap  // the exact file capability set, raised effective at exec
	// OnDemand are the capabilities of Caps the helper keeps permitted
	// but not effective once it has restricted itself: raised on one
	// thread only around the system calls that use them, lowered again
	// after (helperkit.Raised), so no other call the helper makes, an
	// open of a path above all, runs with them (threat: a confused
	// deputy; CAP_DAC_OVERRIDE effective for the whole life of
	// glove-loopext4 made every open skip permission checks).
	OnDemand []Cap
	Why      string // for auditors: what each capability is used for
}

// Table is the capability table. Order is the order of SECURITY.md.
var Table = []Entry{
	{
		Binary: "glove-mounter", Dir: DirLibexec, Helper: true, Bounds: "mounter.json", Protocol: "helpers/wire/mountwire",
		Caps: []Cap{SysAdmin}, OnDemand: []Cap{SysAdmin},
		Why: "open_tree_attr (a clone with its attributes; before Linux 6.15 open_tree + mount_setattr from a private copy of the mount namespace) and fsopen/fsconfig/fsmount create detached bind and tmpfs mounts; nothing is attached to, or changed in, the host mount table; once serving, effective only on the thread of the call that uses it, for that call",
	},
	{
		Binary: "glove-loopext4", Dir: DirLibexec, Helper: true, Bounds: "loopext4.json", Protocol: "helpers/wire/loopwire",
		Caps: []Cap{SysAdmin, DACOverride}, OnDemand: []Cap{SysAdmin, DACOverride},
		Why: "CAP_SYS_ADMIN for fsopen/fsconfig/fsmount of ext4 and fspick/fsconfig reconfigure read-only (Freeze); CAP_DAC_OVERRIDE only to open the root-only /dev/loop-control (0600, once at start) and /dev/loopN (0660 root:disk); once serving, each is effective only on the thread of the call that uses it, for that call",
	},
	{
		Binary: "glove-loopext4-format", Dir: DirLibexec, Helper: true, Protocol: "helpers/wire/formatwire", StartedBy: "glove-loopext4",
		Why: "none: glove-loopext4's formatter, which creates, allocates and formats (mkfs.ext4) a new image, or removes it again, outside the helper's allowlist",
	},
	{
		Binary: "glove-cgroup", Dir: DirLibexec, Helper: true, Bounds: "cgroup.json", Protocol: "helpers/wire/cgwire",
		Why: "none: works only inside the cgroup subtree delegated to the service user",
	},
	{
		Binary: "glove-streamproxy", Dir: DirLibexec, Helper: true, Bounds: "streamproxy.json", Protocol: "helpers/wire/streamwire",
		Why: "none: relays bounded frames between descriptors it is given",
	},
	{
		Binary: "glove-userns", Dir: DirLibexec, Helper: true, Bounds: "userns.json", Protocol: "helpers/wire/userwire",
		Caps: []Cap{SysAdmin}, OnDemand: []Cap{SysAdmin},
		Why: "clone(CLONE_NEWUSER), which Debian's kernel.unprivileged_userns_clone=0 refuses without it, for one empty user namespace of the service user per session, only when the operator enabled it (userns.json); once serving, effective only on the thread of that clone, for that call",
	},
	{Binary: "glove-shim", Dir: DirLibexec, Helper: true, Why: "none: builds the sandbox inside user namespaces it creates"},
	{Binary: "gloved", Dir: DirBin, Why: "none: the supervisor parses remote input and so holds no capability"},
	{Binary: "glove", Dir: DirBin, Why: "none: the operator's command line"},
}

// MustLookup returns the row for an executable name and panics without
// one: for the helpers' own packages, whose names are rows by
// construction (TestSpecsMatchTables).
func MustLookup(binary string) Entry {
	if e, ok := Lookup(binary); ok {
		return e
	}
	panic("captable: no row for " + binary)
}

// Lookup returns the row for an executable name.
func Lookup(binary string) (Entry, bool) {
	for _, e := range Table {
		if e.Binary == binary {
			return e, true
		}
	}
	return Entry{}, false
}

// Mask is the row as a capability bitmask, as in /proc/PID/status.
func (e Entry) Mask() uint64 { return mask(e.Caps) }

// Effective is the row's effective set while the helper serves and
// between requests: Mask without OnDemand.
func (e Entry) Effective() uint64 { return e.Mask() &^ mask(e.OnDemand) }

func mask(caps []Cap) (m uint64) {
	for _, c := range caps {
		m |= 1 << c.Bit
	}
	return m
}
