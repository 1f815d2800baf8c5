package mountwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Bind.Type(), &BindRequest{Flags: BindAll}), wiretest.S(Bind.Type()+1, &BindReply{}),
	wiretest.S(Tmpfs.Type(), &TmpfsRequest{SizeBytes: 1 << 30, Inodes: 1 << 16, Mode: 0o755, Flags: TmpfsNoExec}),
	wiretest.S(Tmpfs.Type()+1, &TmpfsReply{}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-mounter", Protocol: wire.Version}),
}

var bad = []wiretest.Bad{
	wiretest.B("bind without its source descriptor", wiretest.Frame(Bind.Type(), 0, 1, 0, 0, 0), 0, wire.ErrFDCount),
	wiretest.B("bind with two descriptors", wiretest.Frame(Bind.Type(), 2, 1, 0, 0, 0), 2, wire.ErrFDCount),
	wiretest.B("bind flags truncated", wiretest.Frame(Bind.Type(), 1, 1, 0), 1, wire.ErrShortPayload),
	wiretest.B("bind trailing byte", wiretest.Frame(Bind.Type(), 1, 1, 0, 0, 0, 0), 1, wire.ErrTrailing),
	wiretest.B("bind reply without the mount", wiretest.Frame(Bind.Type()+1, 0), 0, wire.ErrFDCount),
	wiretest.B("tmpfs with a descriptor", wiretest.Frame(Tmpfs.Type(), 1, make([]byte, 24)...), 1, wire.ErrFDCount),
	wiretest.B("tmpfs short", wiretest.Frame(Tmpfs.Type(), 0, make([]byte, 23)...), 0, wire.ErrShortPayload),
	wiretest.B("tmpfs trailing", wiretest.Frame(Tmpfs.Type(), 0, make([]byte, 25)...), 0, wire.ErrTrailing),
	wiretest.B("tmpfs reply with payload", wiretest.Frame(Tmpfs.Type()+1, 1, 0), 1, wire.ErrTrailing),
	wiretest.B("glove-loopext4's Create", wiretest.Frame(0x0201, 1, 1, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0), 1, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of glove-mounter's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }

// TestInodesFor is the derivation's table: the floor, the ratio, and the
// shipped bounds (a 2 GiB medium disk, a 4 GiB harness disk, the 8 GiB
// max_tmpfs_bytes whose inodes are max_tmpfs_inodes).
func TestInodesFor(t *testing.T) {
	for _, c := range []struct{ size, want uint64 }{
		{0, MinInodes},
		{4096, MinInodes},
		{64 << 20, 4096},
		{64<<20 + 16<<10, 4097},
		{256 << 20, 16384},
		{1 << 30, 65536},
		{2 << 30, 131072},
		{4 << 30, 262144},
		{8 << 30, 524288},
		{1 << 40, 1 << 26},
	} {
		if got := InodesFor(c.size); got != c.want {
			t.Errorf("InodesFor(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}
