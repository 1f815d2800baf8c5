// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"os"
	"testing"
)

func TestParseStartTicks(t *testing.T) {
	good := map[string]uint64{
		"1 (init) S 0 1 1 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 42 1000 200": 42,
		"7 (a) b) c) R 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0":         99,
	}
	for line, want := range good {
		if got, err := parseStartTicks(line); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "1 init S", "1 (x) S 1 2 3", "1 (x) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 nan 0"} {
		if _, err := parseStartTicks(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestIdentityOfThisProcess(t *testing.T) {
	id, err := BootID()
	if err != nil || len(id) != 36 {
		t.Fatalf("boot id %q: %v", id, err)
	}
	a, err := StartTicks(os.Getpid())
	if err != nil || a == 0 {
		t.Fatalf("start ticks: %d %v", a, err)
	}
	if b, _ := StartTicks(os.Getpid()); b != a {
		t.Errorf("start ticks changed: %d then %d", a, b)
	}
	if _, err := StartTicks(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("missing pid: %v", err)
	}
}
