// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// FuzzReceive sends Receive what a broken or hostile shim could: any
// bytes (up to 16) with any number of descriptors (0 to 9) in one
// message, or none, then closes its end. Receive returns exactly the
// listeners it was asked for, each close-on-exec, or an error; either
// way no descriptor is left open.
func FuzzReceive(f *testing.F) {
	f.Add([]byte{0}, uint8(1), uint8(0))
	f.Add([]byte{0, 0}, uint8(1), uint8(1))
	f.Add([]byte{}, uint8(0), uint8(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, uint8(9), uint8(7))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		f.Fatal(err)
	}
	defer lf.Close()
	f.Fuzz(func(t *testing.T, msg []byte, nfds, want uint8) {
		if len(msg) > 16 {
			msg = msg[:16]
		}
		n := 1 + int(want%8)
		before := openFDs(t)
		shim, sup, err := handoff()
		if err != nil {
			t.Fatal(err)
		}
		fds := make([]int, int(nfds%10))
		for i := range fds {
			fds[i] = int(lf.Fd())
		}
		switch {
		case len(fds) > 0:
			// A stream socket carries descriptors only with a byte.
			if err := unix.Sendmsg(int(shim.Fd()), append([]byte{0}, msg...), unix.UnixRights(fds...), nil, 0); err != nil {
				t.Fatal(err)
			}
		case len(msg) > 0:
			if _, err := shim.Write(msg); err != nil {
				t.Fatal(err)
			}
		}
		shim.Close()
		files, err := Receive(sup, n, time.Now().Add(2*time.Second))
		sup.Close()
		if err == nil {
			if len(files) != n {
				t.Fatalf("Receive: %d files, want %d", len(files), n)
			}
			for _, f := range files {
				fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
				if err != nil || fl&unix.FD_CLOEXEC == 0 {
					t.Errorf("received descriptor not close-on-exec: %#x %v", fl, err)
				}
			}
		} else if files != nil {
			t.Fatalf("Receive failed (%v) and returned %d files", err, len(files))
		}
		for _, f := range files {
			f.Close()
		}
		if after := openFDs(t); after != before {
			t.Fatalf("%d descriptors open after, %d before (msg %d bytes, %d descriptors, want %d): %v", after, before, len(msg), len(fds), n, err)
		}
	})
}
