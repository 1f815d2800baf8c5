// SPDX-License-Identifier: Apache-2.0

package daemon

// OpenConns is how many control connections gloved holds open: the
// connection tests' leak check (every closed connection leaves the map).
func (d *Daemon) OpenConns() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}
