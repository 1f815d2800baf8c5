// SPDX-License-Identifier: Apache-2.0

// Package cgroup is glove-cgroup: it owns every cgroup write of a
// session (create with limits, place, kill, remove, stat) inside the
// subtree delegated to the service user. It holds no capability: the
// delegation (the parent cgroups chowned to the service user) is its
// whole authority, and the kernel's cgroupfs permission checks bound it.
//
// The supervisor is presumed compromised. A session name is one path
// component in [a-z0-9][a-z0-9-]{0,63}, only ever resolved relative to
// the parent directories opened at start-up; limits must be non-zero
// (ErrBadRequest) and within cgroup.json (ErrRefused); a process is named
// by a pidfd, never a pid, and must belong to the service user (see
// place.go).
package cgroup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-cgroup"

// Hard ceilings no configuration may exceed, and the bound on
// Config.ExtraParents.
const (
	HardMaxMemoryBytes = 1 << 50
	HardMaxPids        = 1 << 22
	MaxExtraParents    = 8
)

// Config is glove-cgroup's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// Parent is the delegated cgroup, relative to each hierarchy's
	// mount point (for example "/glove"); sessions are created below it.
	Parent string `json:"parent"`
	// ExtraParents are further delegated cgroups, of other units that run
	// a supervisor (the shipped cgroup.json names `glove run`'s). The
	// helper serves the parent its own cgroup (its supervisor's) is in.
	ExtraParents []string `json:"extra_parents,omitempty"`
	// MaxMemoryBytes and MaxPids cap each session's limits.
	MaxMemoryBytes uint64 `json:"max_memory_bytes"`
	MaxPids        uint64 `json:"max_pids"`
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if len(c.ExtraParents) > MaxExtraParents {
		return helperkit.Fault("extra_parents", fmt.Sprintf("more than %d", MaxExtraParents))
	}
	all := c.Parents()
	for i, p := range all {
		field := "parent"
		if i > 0 {
			field = "extra_parents"
		}
		if err := helperkit.CheckAbsPath(field, p); err != nil {
			return err
		}
		if p == "/" {
			return helperkit.Fault(field, "the root cgroup is never delegated")
		}
		// Nested or repeated parents would make the choice of parent
		// depend on the order of the list.
		for _, q := range all[:i] {
			if p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") {
				return helperkit.Fault(field, fmt.Sprintf("%s and %s overlap", p, q))
			}
		}
	}
	return errors.Join(helperkit.CheckRange("max_memory_bytes", c.MaxMemoryBytes, HardMaxMemoryBytes),
		helperkit.CheckRange("max_pids", c.MaxPids, HardMaxPids))
}

// CheckLimits refuses (ErrRefused) limits over max_memory_bytes or
// max_pids, naming the one bound exceeded (memory's if both) and both
// values; packaging's shipped-bounds test judges profiles with it too.
func (c *Config) CheckLimits(memoryBytes, pids uint64) error {
	if memoryBytes > c.MaxMemoryBytes {
		return refuse(wire.ErrRefused, "memory limit %d is over cgroup.json's max_memory_bytes %d", memoryBytes, c.MaxMemoryBytes)
	} else if pids > c.MaxPids {
		return refuse(wire.ErrRefused, "pids limit %d is over cgroup.json's max_pids %d", pids, c.MaxPids)
	}
	return nil
}

// Parents is Parent followed by ExtraParents.
func (c *Config) Parents() []string { return append([]string{c.Parent}, c.ExtraParents...) }

// Spec is glove-cgroup for helperkit.Main.
func Spec() helperkit.Spec {
	cfg := &Config{}
	return helperkit.Spec{
		Name: Name, Config: cfg, Syscalls: Syscalls,
		Protocol: cgwire.Protocol, Serial: true,
		Handlers: func(_ *unix.Ucred) ([]wire.Handler, error) {
			s, err := newServer(cfg)
			if err != nil {
				return nil, err
			}
			return []wire.Handler{
				cgwire.Create.Handle(s.create), cgwire.Place.Handle(s.place), cgwire.Kill.Handle(s.kill),
				cgwire.Remove.Handle(s.remove), cgwire.Stat.Handle(s.stat), cgwire.Freeze.Handle(s.freeze),
				cgwire.RemoveEmpty.Handle(s.removeEmpty), cgwire.Join.Handle(s.join),
			}, nil
		},
	}
}
