// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"testing"
	"time"
)

// TestAdmitPolicy is the table of admission decisions: existing
// connections (uid, idle time, pinned by an attachment to a running
// session or a request in progress) and a new connection's uid, to the
// connection closed to make room, or a refusal. The bounds are small
// (4 in all, 2 per uid) so that each row is readable.
func TestAdmitPolicy(t *testing.T) {
	const total, share = 4, 2
	s := time.Second
	type pc = peerConn
	cases := []struct {
		name   string
		open   []peerConn
		uid    int
		victim int // -1: none
		reason string
		refuse bool
	}{
		{"empty", nil, 1, -1, "", false},
		{"room for the uid and in all", []pc{{1, s, false}, {2, s, false}}, 1, -1, "", false},
		{"uid at its share: its longest idle", []pc{{1, 2 * s, false}, {1, 5 * s, false}, {2, 9 * s, false}}, 1, 1, reasonUIDShare, false},
		{"uid at its share: another uid's idler is spared", []pc{{2, 99 * s, false}, {1, 2 * s, false}, {1, 3 * s, false}}, 1, 2, reasonUIDShare, false},
		{"uid at its share: pinned ones are not evicted", []pc{{1, 9 * s, true}, {1, 1 * s, false}}, 1, 1, reasonUIDShare, false},
		{"uid at its share, all pinned: refused though others idle", []pc{{1, 9 * s, true}, {1, 9 * s, true}, {2, 99 * s, false}}, 1, -1, "", true},
		{"total reached, uid under its share: globally longest idle", []pc{{2, 3 * s, false}, {3, 7 * s, false}, {2, 1 * s, false}, {3, 5 * s, false}}, 1, 1, reasonTotal, false},
		{"total reached: pinned skipped", []pc{{2, 3 * s, false}, {3, 7 * s, true}, {2, 1 * s, false}, {3, 5 * s, false}}, 1, 3, reasonTotal, false},
		{"total reached: all pinned: refused", []pc{{2, s, true}, {3, s, true}, {2, s, true}, {3, s, true}}, 1, -1, "", true},
		{"total reached, new uid holds one: global still", []pc{{1, 1 * s, false}, {2, 4 * s, false}, {3, 2 * s, false}, {2, 3 * s, false}}, 1, 1, reasonTotal, false},
		{"uid at share and total reached: its own first", []pc{{1, 1 * s, false}, {2, 9 * s, false}, {1, 2 * s, false}, {2, 8 * s, false}}, 1, 2, reasonUIDShare, false},
		{"equally idle: the earliest accepted", []pc{{1, s, false}, {1, s, false}}, 1, 0, reasonUIDShare, false},
		{"above the bounds (bounds lowered): still one at a time", []pc{{1, s, false}, {1, 2 * s, false}, {1, 3 * s, false}}, 1, 2, reasonUIDShare, false},
	}
	for _, c := range cases {
		v, reason, refuse := admit(c.open, c.uid, total, share)
		if v != c.victim || reason != c.reason || refuse != c.refuse {
			t.Errorf("%s: victim %d reason %q refuse %v, want %d %q %v", c.name, v, reason, refuse, c.victim, c.reason, c.refuse)
		}
	}
}
