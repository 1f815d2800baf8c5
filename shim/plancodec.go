// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"encoding/binary"
	"slices"
)

// The plan goes from stage 0's Go part to its C waiter in this binary
// form: simple to decode in C, before any Go runtime exists (as JSON it
// also cost each Go stage of the time about 0.3 ms of reflection caches).
//
// Layout: planMagic, then every field of Plan in declaration order.
// Integers are varints (signed) or uvarints (unsigned), booleans one byte
// 0 or 1, strings and byte slices a uvarint length and the bytes, lists a
// uvarint count and the elements, optional values (Umask, Seccomp) a
// presence byte 0 or 1 and the value. DenyIoctls is a plain byte slice:
// empty and absent are one value, nil. Nothing may follow the last field.
//
// Only C decodes it in production (shim/cstage/plan.c, run by stage 0's
// waiter before any Go runtime exists). decodePlan, in plandecode_test.go,
// is the Go statement of the same rules: the tests' reference, against
// which FuzzCDecodePlan checks the C decoder on every input. The bytes
// come from stage 0, which is trusted, but a decoder is where a mistake
// would turn into a wrong sandbox: it refuses anything the encoder would
// not have written, and any string holding a NUL (FuzzDecodePlan checks
// that what it accepts encodes back to the same bytes).
const planMagic = "glove-plan-5\n"

// encodePlan is the plan's binary form (see planMagic).
func encodePlan(p *Plan) []byte {
	var e planEncoder
	e.b = append(e.b, planMagic...)
	e.int(p.PreserveFDs)
	e.str(p.Hostname)
	e.uint(uint64(p.UID))
	e.uint(uint64(p.GID))
	e.uint(uint64(p.HostUID))
	e.uint(uint64(p.HostGID))
	e.bool(p.RootReadonly)
	e.bool(p.RootTmpfs)
	e.uint(uint64(len(p.Mounts)))
	for _, m := range p.Mounts {
		e.str(m.Destination)
		e.str(m.Kind)
		e.str(m.SourcePath)
		e.ident(m.SourceIdent)
		e.int(m.SourceFD)
		e.str(m.SourceSub)
		e.bool(m.Recursive)
		e.uint(m.Attr)
		e.uint(uint64(len(m.Config)))
		for _, kv := range m.Config {
			e.str(kv[0])
			e.str(kv[1])
		}
		e.bool(m.Writable)
		e.bool(m.FileTarget)
	}
	e.strs(p.Masked)
	e.strs(p.Readonly)
	pp := &p.Process
	e.strs(pp.Args)
	e.strs(pp.Env)
	e.str(pp.Cwd)
	e.bool(pp.Terminal)
	e.bool(pp.Umask != nil)
	if pp.Umask != nil {
		e.uint(uint64(*pp.Umask))
	}
	e.uint(uint64(len(pp.Rlimits)))
	for _, r := range pp.Rlimits {
		e.int(r.Resource)
		e.uint(r.Soft)
		e.uint(r.Hard)
	}
	e.bool(pp.Seccomp != nil)
	if pp.Seccomp != nil {
		e.uint(uint64(len(pp.Seccomp)))
		e.b = append(e.b, pp.Seccomp...)
	}
	e.uint(uint64(pp.SeccompFlags))
	e.int(pp.SeccompListenerFD)
	e.bytes(pp.DenyIoctls)
	e.uint(uint64(len(pp.PassFDs)))
	for _, fd := range pp.PassFDs {
		e.int(fd)
	}
	for _, c := range []uint64{pp.Caps.Bounding, pp.Caps.Effective, pp.Caps.Inheritable, pp.Caps.Permitted, pp.Caps.Ambient} {
		e.uint(c)
	}
	e.strs(pp.Writable)
	e.strs(pp.WritableFile)
	e.strs(p.Off)
	e.str(p.RootPath)
	e.ident(p.RootIdent)
	// Sorted, so that one plan has one encoding.
	names := make([]string, 0, len(p.UserBudgets))
	for name := range p.UserBudgets {
		names = append(names, name)
	}
	slices.Sort(names)
	e.uint(uint64(len(names)))
	for _, name := range names {
		e.str(name)
		e.int(p.UserBudgets[name])
	}
	e.uint(uint64(len(p.RootEntries)))
	for _, r := range p.RootEntries {
		e.str(r.Name)
		e.str(r.Link)
		e.bool(r.Dir)
	}
	e.int(p.EgressHandoffFD)
	e.uint(uint64(len(p.EgressPorts)))
	for _, port := range p.EgressPorts {
		e.uint(uint64(port))
	}
	e.int(p.UsernsFD)
	return e.b
}

type planEncoder struct{ b []byte }

func (e *planEncoder) uint(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *planEncoder) int(v int)      { e.b = binary.AppendVarint(e.b, int64(v)) }
func (e *planEncoder) str(s string)   { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *planEncoder) bytes(b []byte) { e.uint(uint64(len(b))); e.b = append(e.b, b...) }
func (e *planEncoder) ident(id Ident) {
	e.uint(id.Dev)
	e.uint(id.Ino)
}
func (e *planEncoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *planEncoder) strs(ss []string) {
	e.uint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}
