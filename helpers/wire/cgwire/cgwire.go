// SPDX-License-Identifier: Apache-2.0

// Package cgwire declares glove-cgroup's protocol (types 0x0300-0x03ff).
// A session is named by a string the helper checks against
// [a-z0-9][a-z0-9-]{0,63} and only ever uses as one path component
// relative to its delegated parents. The helper links this package and
// the wire core, not the other helpers' messages.
package cgwire

import "github.com/glove-sandbox/glove/helpers/wire"

// Protocol is glove-cgroup's protocol.
var Protocol = wire.NewProtocol("glove-cgroup", Create, Place, Kill, Remove, Stat, Freeze, RemoveEmpty, Join)

// The routes: each request, its reply and the descriptors they carry.
var (
	// Create's reply carries the session's four descriptors.
	Create = wire.NewRoute[CreateRequest, CreateReply](0x0301, 0, 4, false)
	// Place carries the pidfd of the process to place.
	Place       = wire.NewRoute[PlaceRequest, PlaceReply](0x0303, 1, 0, false)
	Kill        = wire.NewRoute[KillRequest, KillReply](0x0305, 0, 0, false)
	Remove      = wire.NewRoute[RemoveRequest, RemoveReply](0x0307, 0, 0, false)
	Stat        = wire.NewRoute[StatRequest, StatReply](0x0309, 0, 0, false)
	Freeze      = wire.NewRoute[FreezeRequest, FreezeReply](0x030b, 0, 0, false)
	RemoveEmpty = wire.NewRoute[RemoveEmptyRequest, RemoveEmptyReply](0x030d, 0, 0, false)
	// Join's reply carries the session's two v1 tasks files.
	Join = wire.NewRoute[JoinRequest, JoinReply](0x030f, 0, 2, false)
)

// CreateRequest asks for a new session cgroup with a memory limit (swap
// excluded) and a process limit.
type CreateRequest struct {
	Session     string `wire:"64"`
	MemoryBytes uint64
	Pids        uint64
}

// CreateReply carries four descriptors, always all, in this order: the
// session's cgroup v2 directory (for CLONE_INTO_CGROUP), its
// cgroup.events (poll for "populated 0"), its memory events (v2
// memory.events where v2 holds the memory controller, else the v1
// memory.oom_control, whose oom_kill line counts OOM kills), and its CPU
// usage (v2 cpu.stat, whose usage_usec exists even without controllers).
// The supervisor reads them to enforce the CPU budget and report the
// terminal reason without asking the helper again. Inode is the
// directory's inode, which tells this cgroup from a later one of the
// same name. V1 says the session also has v1 memory and pids cgroups (a
// hybrid host), which a process born in the v2 one is not in: Join.
type CreateReply struct {
	Inode uint64
	V1    bool
}

// PlaceRequest asks to move the process of the carried pidfd into the
// session's cgroups.
type PlaceRequest struct {
	Session string `wire:"64"`
}

// PlaceReply says the process is in every session cgroup.
type PlaceReply struct{}

// KillRequest asks to kill every process of the session.
type KillRequest struct {
	Session string `wire:"64"`
}

// KillReply says whether the session was seen empty before the helper's
// bounded wait ended.
type KillReply struct{ Empty bool }

// RemoveRequest asks to kill what is left of the session and remove its
// cgroups; a session that does not exist is already removed.
type RemoveRequest struct {
	Session string `wire:"64"`
}

// RemoveReply says the session's cgroups are gone.
type RemoveReply struct{}

// RemoveEmptyRequest asks to remove the session's cgroups only if no
// process is in them: it never kills. gloved's recovery sends it for the
// cgroups a dead helper left; a cgroup that holds a process (another
// supervisor's session being started, say) is refused, and the kernel's
// refusal to remove a populated cgroup makes the check and the removal
// one step. A session that does not exist is already removed.
type RemoveEmptyRequest struct {
	Session string `wire:"64"`
}

// RemoveEmptyReply says the session's cgroups are gone.
type RemoveEmptyReply struct{}

// JoinRequest asks for the session's v1 tasks files, so that glove-shim
// can move itself into the session's v1 cgroups (refused when the
// session has none). A process that writes "0" to a v1 tasks file moves
// only its calling thread and takes no global lock; writing its pid to
// cgroup.procs, as Place does, takes the kernel's cgroup_threadgroup_rwsem
// for writing, which waits for an RCU grace period (5 to 11 ms measured
// on a hybrid host, on the path of every start). glove-shim joins before
// its Go runtime starts, while it has one thread, and Place then finds it
// in place.
type JoinRequest struct {
	Session string `wire:"64"`
}

// JoinReply carries two descriptors, in this order: the session's v1
// memory and pids tasks files, open for writing only. They give no more
// than the service user has: the kernel lets a writer move only its own
// user's processes, into the session's cgroups.
type JoinReply struct{}

// StatRequest asks for the session's accounting.
type StatRequest struct {
	Session string `wire:"64"`
}

// StatReply is the session's accounting. PidsPeak is 0 where the kernel
// keeps no peak (v1 pids).
type StatReply struct {
	MemoryPeakBytes uint64
	OOMKills        uint64
	PidsCurrent     uint64
	PidsPeak        uint64
	CPUTimeNS       uint64
}

// FreezeRequest asks to freeze (Frozen) or thaw the session through the
// v2 cgroup.freeze: a frozen session runs nothing and forks nothing while
// the supervisor inspects or winds it down.
type FreezeRequest struct {
	Session string `wire:"64"`
	Frozen  bool
}

// FreezeReply says the kernel reported the requested state
// (cgroup.events "frozen 1" or "frozen 0") within the helper's bounded
// wait.
type FreezeReply struct{ Settled bool }
