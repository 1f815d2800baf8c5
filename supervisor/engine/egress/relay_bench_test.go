// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// roundTrip makes one connection to addr, sends msg, half-closes and
// reads the answer to its end, as a harness's request on a connection of
// its own does.
func roundTrip(network, addr, msg string) (string, error) {
	c, err := net.Dial(network, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// startSocat relays a TCP port of the host's loopback to the unix socket
// sock with socat, forking per connection: what an operator without
// Glove's relay would put in front of a gateway's socket. It returns the
// address.
func startSocat(b *testing.B, sock string) string {
	b.Helper()
	path, err := exec.LookPath("socat")
	if err != nil {
		b.Skip("socat is not installed: it is the anchor (scripts/install-deps.sh installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(path, "TCP4-LISTEN:"+strconv.Itoa(port)+",bind=127.0.0.1,fork,reuseaddr", "UNIX-CONNECT:"+sock)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cmd.Process.Kill(); err != nil {
			b.Errorf("kill socat: %v", err)
		}
		// Killed is how it ends; any other end is a fault.
		var ee *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			b.Errorf("socat's end: %v", err)
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if i > 500 {
			b.Fatal("socat did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkEgressConnect1KiB measures what one request of a harness
// through an egress endpoint costs: a new connection, 1 KiB up, the
// upstream's answer back, closed. Each iteration makes it three ways in
// turn, in the same run: to the upstream's unix socket directly (the
// floor: direct-p50-ns), through socat forking per connection from a
// loopback port to that socket (the anchor: socat-p50-ns), and through
// the relay with its durable audit, two fdatasynced records per
// connection (p50-ns). It reports each p50 and the relay's ratio to
// socat's (ratio-socat).
func BenchmarkEgressConnect1KiB(b *testing.B) { benchWays(b, 1<<10) }

// BenchmarkEgressStream4MiB is BenchmarkEgressConnect1KiB with 4 MiB each
// way: the relay's copying, more than its connection's set-up and audit.
func BenchmarkEgressStream4MiB(b *testing.B) { benchWays(b, 4<<20) }

func benchWays(b *testing.B, size int) {
	sock := upstream(b)
	r, relayAddr, _ := relay(b, Upstream{"unix", sock}, DefaultBounds)
	socatAddr := startSocat(b, sock)
	msg := strings.Repeat("q", size)
	ways := []struct{ network, addr string }{{"unix", sock}, {"tcp", socatAddr}, {"tcp", relayAddr}}
	lat := make([][]time.Duration, len(ways))
	b.ResetTimer()
	for range b.N {
		for i, w := range ways {
			t0 := time.Now()
			got, err := roundTrip(w.network, w.addr, msg)
			d := time.Since(t0)
			if err != nil || got != "pong:"+msg {
				b.Fatalf("%s %s: %d bytes back, %v", w.network, w.addr, len(got), err)
			}
			lat[i] = append(lat[i], d)
		}
	}
	b.StopTimer()
	p50 := make([]float64, len(ways))
	for i, l := range lat {
		slices.Sort(l)
		p50[i] = float64(l[len(l)/2].Nanoseconds())
	}
	b.ReportMetric(p50[0], "direct-p50-ns")
	b.ReportMetric(p50[1], "socat-p50-ns")
	b.ReportMetric(p50[2], "p50-ns")
	b.ReportMetric(p50[2]/p50[1], "ratio-socat")
	if err := r.Stop(); err != nil {
		b.Fatal(err)
	}
}
