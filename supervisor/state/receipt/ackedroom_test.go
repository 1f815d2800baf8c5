// SPDX-License-Identifier: Apache-2.0

package receipt

import (
	"fmt"
	"os"
	"testing"
)

// TestReserveMakesRoomFromAcknowledged: acknowledged receipts leave
// memory at once (forgetAcked) but stay in the file until a compaction;
// a reservation that does not fit compacts them away, also after a
// reopen (their acknowledgements replayed). A 48-record journal takes
// 42 sessions in six opens.
func TestReserveMakesRoomFromAcknowledged(t *testing.T) {
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	n, compactions := 0, 0
	for range 6 {
		r, _, err := Open(Options{Dir: d, Key: key, Anchor: anchor, MaxRecords: 48,
			OnCompact: func(_ CompactInfo, err error) {
				if err != nil {
					t.Errorf("compaction: %v", err)
				}
				compactions++
			}})
		if err != nil {
			t.Fatal(err)
		}
		for range 7 {
			id := fmt.Sprintf("s%d", n)
			n++
			if err := r.Reserve(id, 1); err != nil {
				t.Fatalf("session %d: %v (journal %+v)", n, err, r.j.Stats())
			}
			e, err := r.Finalize(body(id))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Ack(e.Seq, e.EnvelopeMAC); err != nil {
				t.Fatal(err)
			}
			if h := r.Held(); h != 0 {
				t.Fatalf("session %d: %d held after its acknowledgement", n, h)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if compactions == 0 {
		t.Error("no compaction in 42 sessions of a 48-record journal")
	}
}
