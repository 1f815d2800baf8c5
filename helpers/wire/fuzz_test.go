package wire

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeFrame feeds arbitrary frames and descriptor counts to
// DecodeFrame. It must never panic, every failure must be a
// *ProtocolError, and every success must re-encode to exactly the input:
// the encoding is canonical, so two peers can never read different
// messages out of the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	valid := []Message{
		&Hello{},
		&HelloReply{Name: "glove-cgroup", Protocol: Version, CapEffective: 1<<21 | 1<<12, CapPermitted: 1 << 21},
		&HelloReply{},
		&Error{Code: ErrProtocol, Message: "bad frame"},
		&Error{Code: ErrUnsupported},
		&testPing{Tag: 3},
		&testFD{Flag: true, Tag: 1, Blob: []byte("blob")},
		&Bind{Flags: BindReadOnly}, &BindReply{},
		&Tmpfs{SizeBytes: 1 << 20, Inodes: 64, Mode: 0o700, Flags: TmpfsNoExec}, &TmpfsReply{},
		&Create{Name: "s1.img", SizeBytes: 64 << 20}, &CreateReply{},
		&Attach{Name: "s1.img", ReadOnly: true}, &AttachReply{},
		&Freeze{}, &FreezeReply{},
		&CgCreate{Session: "s1", MemoryBytes: 64 << 20, Pids: 32}, &CgCreateReply{Inode: 4242},
		&CgPlace{Session: "s1"}, &CgPlaceReply{},
		&CgKill{Session: "s1"}, &CgKillReply{Empty: true},
		&CgRemove{Session: "s1"}, &CgRemoveReply{},
		&CgFreeze{Session: "s1", Frozen: true}, &CgFreezeReply{Settled: true},
		&CgRemoveEmpty{Session: "s1"}, &CgRemoveEmptyReply{},
		&CgStat{Session: "s1"}, &CgStatReply{MemoryPeakBytes: 1, OOMKills: 2, PidsCurrent: 3, PidsPeak: 4, CPUTimeNS: 5},
	}
	for i, m := range valid {
		buf, err := EncodeFrame(uint32(i+1), m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf, uint8(m.FDs()))
	}
	for _, bf := range badFrames() {
		if len(bf.buf) <= 4096 {
			f.Add(bf.buf, uint8(bf.nfds))
		}
	}
	f.Fuzz(func(t *testing.T, buf []byte, nfds uint8) {
		id, m, err := DecodeFrame(buf, int(nfds))
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || m != nil {
				t.Fatalf("error %v (message %v) is not a bare *ProtocolError", err, m)
			}
			return
		}
		if m.FDs() != int(nfds) {
			t.Fatalf("accepted %d descriptors for type %#04x carrying %d", nfds, uint16(m.Type()), m.FDs())
		}
		out, err := EncodeFrame(id, m)
		if err != nil {
			t.Fatalf("decoded %#v does not re-encode: %v", m, err)
		}
		if !bytes.Equal(out, buf) {
			t.Fatalf("not canonical:\n in % x\nout % x", buf, out)
		}
	})
}
