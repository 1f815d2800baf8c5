// SPDX-License-Identifier: Apache-2.0

package session

import (
	"fmt"
	"time"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/engine/egress"
)

// egressWait bounds how long the relay waits for the listeners after the
// release: stage 1 sends them within milliseconds of its start, before the
// program exists; a shim that ended first closes the hand-off socket and
// the wait ends at once.
const egressWait = 60 * time.Second

// checkEgress checks the launch's egress endpoints: at most
// spec.MaxEgressPorts, each port once, each upstream a unix socket by
// absolute clean path or a loopback TCP address.
func checkEgress(eps []egress.Endpoint, services bool) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("session: egress: %s: %w", fmt.Sprintf(f, a...), ErrInvalid)
	}
	if len(eps) > 0 && services {
		// The pathname transport's connect is gloved's to answer (a
		// seccomp notification); egress needs the kernel's own.
		return fmt.Errorf("session: egress endpoints with the pathname local-service transport: %w", ErrUnsupported)
	}
	if len(eps) > spec.MaxEgressPorts {
		return bad("%d endpoints, more than %d", len(eps), spec.MaxEgressPorts)
	}
	seen := map[uint16]bool{}
	for i, ep := range eps {
		if ep.Port == 0 || seen[ep.Port] {
			return bad("endpoints[%d]: port %d is 0 or twice", i, ep.Port)
		}
		seen[ep.Port] = true
		if ep.PolicyID == "" {
			return bad("endpoints[%d]: no egress policy", i)
		}
		if err := egress.CheckUpstream(ep.Upstream); err != nil {
			return bad("endpoints[%d]: %v", i, err)
		}
	}
	return nil
}

func egressPorts(eps []egress.Endpoint) []uint16 {
	var ports []uint16
	for _, ep := range eps {
		ports = append(ports, ep.Port)
	}
	return ports
}

// egressRelay is a session's relay, started once the listeners arrive.
type egressRelay struct {
	done  chan struct{}
	relay *egress.Relay
	err   error // receiving or starting failed
}

// startEgress receives the listeners on the hand-off socket in the
// background (the program is already released) and relays them. Until
// the relay runs, a connection of the program waits in the listener's
// backlog.
func (p *prepared) startEgress(l *Launch, audit *egress.Audit) {
	r := &egressRelay{done: make(chan struct{})}
	p.egress = r
	sup := p.egressSup
	go func() {
		defer close(r.done)
		files, err := egress.Receive(sup, len(l.Egress), time.Now().Add(egressWait))
		if err != nil {
			r.err = err
			return
		}
		r.relay, r.err = egress.Start(l.Name, l.Egress, files, audit, egress.DefaultBounds)
	}()
}

// stop ends the relay: it waits for the receipt of the listeners (ended
// by the shim's exit at the latest) and stops the relay. The error is
// what failed during the session.
func (r *egressRelay) stop() error {
	if r == nil {
		return nil
	}
	<-r.done
	if r.err != nil {
		return r.err
	}
	return r.relay.Stop()
}
