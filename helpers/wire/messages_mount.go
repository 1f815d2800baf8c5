package wire

// Messages of glove-mounter (0x0100-0x01ff) and glove-loopext4
// (0x0200-0x02ff). Every request is answered by its reply type or by an
// Error; replies that carry a mount carry exactly one descriptor.

const (
	MsgBind        MsgType = 0x0101
	MsgBindReply   MsgType = 0x0102
	MsgTmpfs       MsgType = 0x0103
	MsgTmpfsReply  MsgType = 0x0104
	MsgCreate      MsgType = 0x0201
	MsgCreateReply MsgType = 0x0202
	MsgAttach      MsgType = 0x0203
	MsgAttachReply MsgType = 0x0204
	MsgFreeze      MsgType = 0x0205
	MsgFreezeReply MsgType = 0x0206
)

// Bind flags. Undefined bits are refused by the helper, not ignored.
const (
	BindReadOnly uint32 = 1 << 0
	BindNoExec   uint32 = 1 << 1
	BindAll             = BindReadOnly | BindNoExec
)

// Tmpfs flags.
const (
	TmpfsNoExec uint32 = 1 << 0
	TmpfsAll           = TmpfsNoExec
)

// MaxImageName bounds an image file name.
const MaxImageName = 64

// Bind asks glove-mounter for a detached recursive clone of the source
// descriptor it carries (a directory or regular file the supervisor
// opened with openat2). The clone is always nosuid,nodev and private.
type Bind struct{ Flags uint32 }

func (*Bind) Type() MsgType       { return MsgBind }
func (*Bind) FDs() int            { return 1 }
func (m *Bind) encode(e *Encoder) { e.U32(m.Flags) }
func (m *Bind) decode(d *Decoder) { m.Flags = d.U32() }

// BindReply carries the detached mount.
type BindReply struct{}

func (*BindReply) Type() MsgType   { return MsgBindReply }
func (*BindReply) FDs() int        { return 1 }
func (*BindReply) encode(*Encoder) {}
func (*BindReply) decode(*Decoder) {}

// Tmpfs asks glove-mounter for a detached tmpfs of SizeBytes (the byte
// quota), at most Inodes inodes, root directory Mode, owned by the
// requesting peer.
type Tmpfs struct {
	SizeBytes uint64
	Inodes    uint64
	Mode      uint32
	Flags     uint32
}

func (*Tmpfs) Type() MsgType { return MsgTmpfs }
func (*Tmpfs) FDs() int      { return 0 }
func (m *Tmpfs) encode(e *Encoder) {
	e.U64(m.SizeBytes)
	e.U64(m.Inodes)
	e.U32(m.Mode)
	e.U32(m.Flags)
}
func (m *Tmpfs) decode(d *Decoder) {
	m.SizeBytes = d.U64()
	m.Inodes = d.U64()
	m.Mode = d.U32()
	m.Flags = d.U32()
}

// TmpfsReply carries the detached tmpfs.
type TmpfsReply struct{}

func (*TmpfsReply) Type() MsgType   { return MsgTmpfsReply }
func (*TmpfsReply) FDs() int        { return 1 }
func (*TmpfsReply) encode(*Encoder) {}
func (*TmpfsReply) decode(*Decoder) {}

// Create asks glove-loopext4 to create image Name of exactly SizeBytes,
// allocated and formatted ext4, in the materialization root whose
// directory descriptor the request carries.
type Create struct {
	Name      string
	SizeBytes uint64
}

func (*Create) Type() MsgType { return MsgCreate }
func (*Create) FDs() int      { return 1 }
func (m *Create) encode(e *Encoder) {
	e.String(m.Name, MaxImageName)
	e.U64(m.SizeBytes)
}
func (m *Create) decode(d *Decoder) {
	m.Name = d.String(MaxImageName)
	m.SizeBytes = d.U64()
}

// CreateReply says the image exists and is formatted.
type CreateReply struct{}

func (*CreateReply) Type() MsgType   { return MsgCreateReply }
func (*CreateReply) FDs() int        { return 0 }
func (*CreateReply) encode(*Encoder) {}
func (*CreateReply) decode(*Decoder) {}

// Attach asks glove-loopext4 to attach image Name of the materialization
// root (the carried directory descriptor) to a free autoclear loop
// device and return a detached ext4 mount of it.
type Attach struct {
	Name     string
	ReadOnly bool
}

func (*Attach) Type() MsgType { return MsgAttach }
func (*Attach) FDs() int      { return 1 }
func (m *Attach) encode(e *Encoder) {
	e.String(m.Name, MaxImageName)
	e.Bool(m.ReadOnly)
}
func (m *Attach) decode(d *Decoder) {
	m.Name = d.String(MaxImageName)
	m.ReadOnly = d.Bool()
}

// AttachReply carries the detached mount.
type AttachReply struct{}

func (*AttachReply) Type() MsgType   { return MsgAttachReply }
func (*AttachReply) FDs() int        { return 1 }
func (*AttachReply) encode(*Encoder) {}
func (*AttachReply) decode(*Decoder) {}

// Freeze asks glove-loopext4 to make the carried detached image mount
// read-only before cleanup.
type Freeze struct{}

func (*Freeze) Type() MsgType   { return MsgFreeze }
func (*Freeze) FDs() int        { return 1 }
func (*Freeze) encode(*Encoder) {}
func (*Freeze) decode(*Decoder) {}

// FreezeReply says the mount is read-only.
type FreezeReply struct{}

func (*FreezeReply) Type() MsgType   { return MsgFreezeReply }
func (*FreezeReply) FDs() int        { return 0 }
func (*FreezeReply) encode(*Encoder) {}
func (*FreezeReply) decode(*Decoder) {}
