// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// supervisorFigures is gloved's supervisor_status answer
// (docs/protocol.md).
type supervisorFigures struct {
	HeapLive      uint64 `json:"heap_live_bytes"`
	HeapObjects   uint64 `json:"heap_objects"`
	Goroutines    uint64 `json:"goroutines"`
	Threads       int    `json:"threads"`
	Descriptors   int    `json:"open_descriptors"`
	Connections   int    `json:"connections"`
	Running       int    `json:"sessions_running"`
	StoreSessions *int   `json:"store_sessions"`
	ReceiptsHeld  *int   `json:"receipts_held"`
	UptimeMS      int64  `json:"uptime_ms"`
}

// askSupervisor calls supervisor_status on gloved's control socket.
func askSupervisor(socket string) (supervisorFigures, error) {
	var f supervisorFigures
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return f, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return f, fmt.Errorf("deadline: %w", err)
	}
	if _, err := c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"supervisor_status"}` + "\n")); err != nil {
		return f, fmt.Errorf("send: %w", err)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := readLine(bufio.NewReaderSize(c, 64<<10), &resp); err != nil {
		return f, err
	}
	if resp.Error != nil {
		return f, fmt.Errorf("error %s", resp.Error)
	}
	if err := json.Unmarshal(resp.Result, &f); err != nil {
		return f, fmt.Errorf("bad answer: %w", err)
	}
	return f, nil
}

// probeSupervisor reports what the running gloved holds (supervisor_status):
// its live heap, goroutines, threads and descriptors, and the sessions it
// keeps, so that growth over months shows before the OOM killer does.
// gloved not running, or a socket this user may not use, is only
// reported: status describes the host, not a service.
func (p statusProbe) probeSupervisor() statusItem {
	it := statusItem{Name: "supervisor", OK: true}
	f, err := askSupervisor(p.socket)
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED):
		it.Detail = fmt.Sprintf("gloved is not running (no control socket at %s)", p.socket)
		return it
	case errors.Is(err, os.ErrPermission):
		it.Detail = fmt.Sprintf("%s: this user may not use it (run as root or the service user)", p.socket)
		return it
	case err != nil:
		it.OK = false
		it.Detail = fmt.Sprintf("gloved at %s: supervisor_status: %v", p.socket, err)
		return it
	}
	it.Detail = fmt.Sprintf("gloved up %s: live heap %.1f MiB (%d objects), %d goroutines, %d threads, %d descriptors, %d connections; %d sessions running",
		(time.Duration(f.UptimeMS) * time.Millisecond).Round(time.Second), float64(f.HeapLive)/(1<<20), f.HeapObjects, f.Goroutines, f.Threads, f.Descriptors, f.Connections, f.Running)
	if f.StoreSessions != nil && f.ReceiptsHeld != nil {
		it.Detail += fmt.Sprintf(", %d in the store, %d held by the receipt journal", *f.StoreSessions, *f.ReceiptsHeld)
	}
	return it
}
