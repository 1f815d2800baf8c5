// SPDX-License-Identifier: Apache-2.0

// Package userns is glove-userns: on a host that refuses unprivileged
// user namespaces (Debian's kernel.unprivileged_userns_clone=0), it makes
// one empty user namespace for one session and hands back its descriptor.
// glove-shim joins it instead of creating one (docs/helpers.md,
// "glove-userns"; docs/hardened-hosts-measured.md for the kernel facts).
//
// It holds CAP_SYS_ADMIN, the capability Debian's switch asks of whoever
// creates a user namespace, effective only on the one thread and around
// the one clone that uses it. One helper process serves one session:
// userwire Create, once. It refuses every request unless the operator
// enabled it in its root-owned bounds file (off as shipped: an operator
// who switched unprivileged user namespaces off did so on purpose, and
// turning this on gives one back to the service user alone).
//
// What a subverted supervisor gains through it: user namespaces owned by
// the service user, children of the initial one, mapping one id onto the
// service user's own uid and gid: what an unrestricted host gives every
// user. The helper writes no other map and has no way to: the kernel lets
// a process without CAP_SETUID/CAP_SETGID map only its own ids, and the
// helper holds neither. What the sandboxed program can never get from it:
// anything; the helper answers the supervisor's socket alone.
package userns

import (
	"fmt"
	"os"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/userwire"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-userns"

// Config is glove-userns's bounds (/etc/glove/userns.json).
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// Enabled is the operator's opt-in; false (as shipped) refuses every
	// Create.
	Enabled bool `json:"enabled"`
}

// Validate checks the bounds.
func (c *Config) Validate() error { return helperkit.CheckSchema(c.SchemaVersion) }

// Spec is glove-userns for helperkit.Main.
func Spec() helperkit.Spec {
	cfg := &Config{}
	return helperkit.Spec{
		Name: Name, Config: cfg, Syscalls: Syscalls, Protocol: userwire.Protocol, Serial: true,
		Handlers: func(_ *unix.Ucred) ([]wire.Handler, error) {
			// /proc is opened now, while open is unrestricted; each
			// request opens only beneath it (the holder's namespace
			// and its three map files).
			proc, err := openProc()
			if err != nil {
				return nil, fmt.Errorf("open /proc: %w", err)
			}
			s := &server{cfg: cfg, uid: uint32(os.Getuid()), gid: uint32(os.Getgid()), proc: proc}
			return []wire.Handler{userwire.Create.Handle(s.create)}, nil
		},
	}
}
