package wire

// Messages of glove-cgroup (0x0300-0x03ff). A session is named by a
// string the helper checks against [a-z0-9][a-z0-9-]{0,63} and only ever
// uses as one path component relative to its delegated parents.

const (
	MsgCgCreate      MsgType = 0x0301
	MsgCgCreateReply MsgType = 0x0302
	MsgCgPlace       MsgType = 0x0303
	MsgCgPlaceReply  MsgType = 0x0304
	MsgCgKill        MsgType = 0x0305
	MsgCgKillReply   MsgType = 0x0306
	MsgCgRemove      MsgType = 0x0307
	MsgCgRemoveReply MsgType = 0x0308
	MsgCgStat        MsgType = 0x0309
	MsgCgStatReply   MsgType = 0x030a
	MsgCgFreeze      MsgType = 0x030b
	MsgCgFreezeReply MsgType = 0x030c
	// CgRemoveEmpty: see the type.
	MsgCgRemoveEmpty      MsgType = 0x030d
	MsgCgRemoveEmptyReply MsgType = 0x030e
)

// MaxSessionName bounds a session name.
const MaxSessionName = 64

// CgCreate asks glove-cgroup for a new session cgroup with a memory limit
// (swap excluded) and a process limit.
type CgCreate struct {
	Session     string
	MemoryBytes uint64
	Pids        uint64
}

func (*CgCreate) Type() MsgType { return MsgCgCreate }
func (*CgCreate) FDs() int      { return 0 }
func (m *CgCreate) encode(e *Encoder) {
	e.String(m.Session, MaxSessionName)
	e.U64(m.MemoryBytes)
	e.U64(m.Pids)
}
func (m *CgCreate) decode(d *Decoder) {
	m.Session = d.String(MaxSessionName)
	m.MemoryBytes = d.U64()
	m.Pids = d.U64()
}

// CgCreateReply carries four descriptors, always all, in this order: the
// session's cgroup v2 directory (for CLONE_INTO_CGROUP), its
// cgroup.events (poll for "populated 0"), its memory events (v2
// memory.events where v2 holds the memory controller, else the v1
// memory.oom_control, whose oom_kill line counts OOM kills), and its CPU
// usage (v2 cpu.stat, whose usage_usec exists even without controllers).
// The supervisor reads them to enforce the CPU budget and report the
// terminal reason without asking the helper again. Inode is the
// directory's inode, which tells this cgroup from a later one of the
// same name.
type CgCreateReply struct{ Inode uint64 }

func (*CgCreateReply) Type() MsgType       { return MsgCgCreateReply }
func (*CgCreateReply) FDs() int            { return 4 }
func (m *CgCreateReply) encode(e *Encoder) { e.U64(m.Inode) }
func (m *CgCreateReply) decode(d *Decoder) { m.Inode = d.U64() }

// CgPlace asks glove-cgroup to move the process of the carried pidfd
// into the session's cgroups.
type CgPlace struct{ Session string }

func (*CgPlace) Type() MsgType       { return MsgCgPlace }
func (*CgPlace) FDs() int            { return 1 }
func (m *CgPlace) encode(e *Encoder) { e.String(m.Session, MaxSessionName) }
func (m *CgPlace) decode(d *Decoder) { m.Session = d.String(MaxSessionName) }

// CgPlaceReply says the process is in every session cgroup.
type CgPlaceReply struct{}

func (*CgPlaceReply) Type() MsgType   { return MsgCgPlaceReply }
func (*CgPlaceReply) FDs() int        { return 0 }
func (*CgPlaceReply) encode(*Encoder) {}
func (*CgPlaceReply) decode(*Decoder) {}

// CgKill asks glove-cgroup to kill every process of the session.
type CgKill struct{ Session string }

func (*CgKill) Type() MsgType       { return MsgCgKill }
func (*CgKill) FDs() int            { return 0 }
func (m *CgKill) encode(e *Encoder) { e.String(m.Session, MaxSessionName) }
func (m *CgKill) decode(d *Decoder) { m.Session = d.String(MaxSessionName) }

// CgKillReply says whether the session was seen empty before the
// helper's bounded wait ended.
type CgKillReply struct{ Empty bool }

func (*CgKillReply) Type() MsgType       { return MsgCgKillReply }
func (*CgKillReply) FDs() int            { return 0 }
func (m *CgKillReply) encode(e *Encoder) { e.Bool(m.Empty) }
func (m *CgKillReply) decode(d *Decoder) { m.Empty = d.Bool() }

// CgRemove asks glove-cgroup to kill what is left of the session and
// remove its cgroups; a session that does not exist is already removed.
type CgRemove struct{ Session string }

func (*CgRemove) Type() MsgType       { return MsgCgRemove }
func (*CgRemove) FDs() int            { return 0 }
func (m *CgRemove) encode(e *Encoder) { e.String(m.Session, MaxSessionName) }
func (m *CgRemove) decode(d *Decoder) { m.Session = d.String(MaxSessionName) }

// CgRemoveReply says the session's cgroups are gone.
type CgRemoveReply struct{}

func (*CgRemoveReply) Type() MsgType   { return MsgCgRemoveReply }
func (*CgRemoveReply) FDs() int        { return 0 }
func (*CgRemoveReply) encode(*Encoder) {}
func (*CgRemoveReply) decode(*Decoder) {}

// CgRemoveEmpty asks glove-cgroup to remove the session's cgroups only if
// no process is in them: it never kills. gloved's recovery sends it for
// the cgroups a dead helper left; a cgroup that holds a process (another
// supervisor's session being started, say) is refused, and the kernel's
// refusal to remove a populated cgroup makes the check and the removal
// one step. A session that does not exist is already removed.
type CgRemoveEmpty struct{ Session string }

func (*CgRemoveEmpty) Type() MsgType       { return MsgCgRemoveEmpty }
func (*CgRemoveEmpty) FDs() int            { return 0 }
func (m *CgRemoveEmpty) encode(e *Encoder) { e.String(m.Session, MaxSessionName) }
func (m *CgRemoveEmpty) decode(d *Decoder) { m.Session = d.String(MaxSessionName) }

// CgRemoveEmptyReply says the session's cgroups are gone.
type CgRemoveEmptyReply struct{}

func (*CgRemoveEmptyReply) Type() MsgType   { return MsgCgRemoveEmptyReply }
func (*CgRemoveEmptyReply) FDs() int        { return 0 }
func (*CgRemoveEmptyReply) encode(*Encoder) {}
func (*CgRemoveEmptyReply) decode(*Decoder) {}

// CgStat asks for the session's accounting.
type CgStat struct{ Session string }

func (*CgStat) Type() MsgType       { return MsgCgStat }
func (*CgStat) FDs() int            { return 0 }
func (m *CgStat) encode(e *Encoder) { e.String(m.Session, MaxSessionName) }
func (m *CgStat) decode(d *Decoder) { m.Session = d.String(MaxSessionName) }

// CgStatReply is the session's accounting. PidsPeak is 0 where the
// kernel keeps no peak (v1 pids).
type CgStatReply struct {
	MemoryPeakBytes uint64
	OOMKills        uint64
	PidsCurrent     uint64
	PidsPeak        uint64
	CPUTimeNS       uint64
}

func (*CgStatReply) Type() MsgType { return MsgCgStatReply }
func (*CgStatReply) FDs() int      { return 0 }
func (m *CgStatReply) encode(e *Encoder) {
	e.U64(m.MemoryPeakBytes)
	e.U64(m.OOMKills)
	e.U64(m.PidsCurrent)
	e.U64(m.PidsPeak)
	e.U64(m.CPUTimeNS)
}
func (m *CgStatReply) decode(d *Decoder) {
	m.MemoryPeakBytes = d.U64()
	m.OOMKills = d.U64()
	m.PidsCurrent = d.U64()
	m.PidsPeak = d.U64()
	m.CPUTimeNS = d.U64()
}

// CgFreeze asks glove-cgroup to freeze (Frozen) or thaw the session
// through the v2 cgroup.freeze: a frozen session runs nothing and forks
// nothing while the supervisor inspects or winds it down.
type CgFreeze struct {
	Session string
	Frozen  bool
}

func (*CgFreeze) Type() MsgType { return MsgCgFreeze }
func (*CgFreeze) FDs() int      { return 0 }
func (m *CgFreeze) encode(e *Encoder) {
	e.String(m.Session, MaxSessionName)
	e.Bool(m.Frozen)
}
func (m *CgFreeze) decode(d *Decoder) {
	m.Session = d.String(MaxSessionName)
	m.Frozen = d.Bool()
}

// CgFreezeReply says the kernel reported the requested state (cgroup.events
// "frozen 1" or "frozen 0") within the helper's bounded wait.
type CgFreezeReply struct{ Settled bool }

func (*CgFreezeReply) Type() MsgType       { return MsgCgFreezeReply }
func (*CgFreezeReply) FDs() int            { return 0 }
func (m *CgFreezeReply) encode(e *Encoder) { e.Bool(m.Settled) }
func (m *CgFreezeReply) decode(d *Decoder) { m.Settled = d.Bool() }
