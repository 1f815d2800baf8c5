// SPDX-License-Identifier: Apache-2.0

package shim

// The Go decoder of the plan: only the tests use it, as the reference the
// C decoder (shim/cstage/plan.c) must agree with on every input
// (FuzzCDecodePlan); production decodes the plan in C only.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// errPlan is wrapped by every decoding error.
var errPlan = errors.New("malformed plan")

// decodePlan reads what encodePlan wrote, refusing anything else: a wrong
// magic, a truncated or overlong field, a count larger than the bytes
// left could hold, a boolean or presence byte other than 0 or 1, a value
// out of its field's range, a string holding a NUL, budgets not in
// strictly increasing order of name, and trailing bytes.
func decodePlan(b []byte) (*Plan, error) {
	if len(b) < len(planMagic) || string(b[:len(planMagic)]) != planMagic {
		return nil, fmt.Errorf("%w: not a glove-shim plan", errPlan)
	}
	d := planDecoder{b: b[len(planMagic):]}
	p := &Plan{}
	p.PreserveFDs = d.int()
	p.Hostname = d.str()
	p.UID = d.uint32()
	p.GID = d.uint32()
	p.HostUID = d.uint32()
	p.HostGID = d.uint32()
	p.RootReadonly = d.bool()
	p.RootTmpfs = d.bool()
	if n := d.count(); n > 0 {
		p.Mounts = make([]MountPlan, n)
		for i := range p.Mounts {
			m := &p.Mounts[i]
			m.Destination = d.str()
			m.Kind = d.str()
			m.SourcePath = d.str()
			m.SourceIdent = d.ident()
			m.SourceFD = d.int()
			m.SourceSub = d.str()
			m.Recursive = d.bool()
			m.Attr = d.uint()
			if k := d.count(); k > 0 {
				m.Config = make([][2]string, k)
				for j := range m.Config {
					m.Config[j] = [2]string{d.str(), d.str()}
				}
			}
			m.Writable = d.bool()
			m.FileTarget = d.bool()
		}
	}
	p.Masked = d.strs()
	p.Readonly = d.strs()
	pp := &p.Process
	pp.Args = d.strs()
	pp.Env = d.strs()
	pp.Cwd = d.str()
	pp.Terminal = d.bool()
	if d.bool() {
		u := d.uint32()
		pp.Umask = &u
	}
	if n := d.count(); n > 0 {
		pp.Rlimits = make([]Rlimit, n)
		for i := range pp.Rlimits {
			pp.Rlimits[i] = Rlimit{Resource: d.int(), Soft: d.uint(), Hard: d.uint()}
		}
	}
	if d.bool() {
		pp.Seccomp = slices.Clone(d.bytes())
		if pp.Seccomp == nil {
			pp.Seccomp = []byte{}
		}
	}
	pp.SeccompFlags = uint(d.uint())
	pp.SeccompListenerFD = d.int()
	// Empty is absent (nil): one plan, one encoding.
	if b := d.bytes(); len(b) > 0 {
		pp.DenyIoctls = slices.Clone(b)
	}
	if n := d.count(); n > 0 {
		pp.PassFDs = make([]int, n)
		for i := range pp.PassFDs {
			pp.PassFDs[i] = d.int()
		}
	}
	for _, c := range []*uint64{&pp.Caps.Bounding, &pp.Caps.Effective, &pp.Caps.Inheritable, &pp.Caps.Permitted, &pp.Caps.Ambient} {
		*c = d.uint()
	}
	pp.Writable = d.strs()
	pp.WritableFile = d.strs()
	p.Off = d.strs()
	p.RootPath = d.str()
	p.RootIdent = d.ident()
	if n := d.count(); n > 0 {
		p.UserBudgets = make(map[string]int, n)
		prev := ""
		for i := range n {
			name := d.str()
			if i > 0 && name <= prev && d.err == nil {
				d.err = fmt.Errorf("%w: budget %q out of order", errPlan, name)
			}
			prev = name
			p.UserBudgets[name] = d.int()
		}
	}
	if n := d.count(); n > 0 {
		p.RootEntries = make([]RootEntry, n)
		for i := range p.RootEntries {
			p.RootEntries[i] = RootEntry{Name: d.str(), Link: d.str(), Dir: d.bool()}
		}
	}
	p.EgressHandoffFD = d.int()
	if n := d.count(); n > 0 {
		p.EgressPorts = make([]uint16, n)
		for i := range p.EgressPorts {
			v := d.uint()
			if (v == 0 || v > 65535) && d.err == nil {
				d.err = fmt.Errorf("%w: egress port %d outside 1..65535", errPlan, v)
			}
			p.EgressPorts[i] = uint16(v)
		}
	}
	p.UsernsFD = d.int()
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d bytes after the last field", errPlan, len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return p, nil
}

// planDecoder reads fields until the first error, which it keeps; every
// read after it returns a zero value.
type planDecoder struct {
	b   []byte
	err error
}

func (d *planDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errPlan, fmt.Sprintf(format, args...))
	}
}

func (d *planDecoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad or truncated unsigned integer")
		return 0
	}
	// Uvarint accepts a value padded with 0x80 bytes; the encoder never
	// writes one, and one value has one encoding.
	if n != len(binary.AppendUvarint(nil, v)) {
		d.fail("unsigned integer not in its shortest form")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *planDecoder) int() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad or truncated integer")
		return 0
	}
	if n != len(binary.AppendVarint(nil, v)) {
		d.fail("integer not in its shortest form")
		return 0
	}
	if v < math.MinInt || v > math.MaxInt {
		d.fail("integer %d out of range", v)
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *planDecoder) uint32() uint32 {
	v := d.uint()
	if v > math.MaxUint32 {
		d.fail("%d does not fit 32 bits", v)
		return 0
	}
	return uint32(v)
}

func (d *planDecoder) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.fail("truncated boolean")
		return false
	}
	c := d.b[0]
	if c > 1 {
		d.fail("boolean byte %d", c)
		return false
	}
	d.b = d.b[1:]
	return c == 1
}

// count reads a list length, which cannot exceed the bytes left: every
// element takes at least one.
func (d *planDecoder) count() int {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail("count %d larger than the %d bytes left", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *planDecoder) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// str refuses a NUL: no stage can hand one inside a string to the kernel,
// which would read it as the string's end (and the C stages' decoder,
// shim/cstage/plan.c, keeps strings NUL-terminated).
func (d *planDecoder) str() string {
	b := d.bytes()
	if slices.Contains(b, 0) {
		d.fail("string contains NUL")
		return ""
	}
	return string(b)
}

func (d *planDecoder) strs() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func (d *planDecoder) ident() Ident {
	return Ident{Dev: d.uint(), Ino: d.uint()}
}
