// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// fillPlan sets every field of a Plan, at any depth, to a value that is
// not its zero value and differs from its neighbours': a field the codec
// forgot would come back zero and fail the comparison.
func fillPlan() *Plan {
	var p Plan
	n := 0
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		n++
		switch v.Kind() {
		case reflect.String:
			v.SetString(fmt.Sprintf("s%d\x01é", n))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int:
			v.SetInt(int64(-n * 1000003)) // negative: descriptors may be -1
		case reflect.Uint32:
			v.SetUint(uint64(0xffff_0000 + n))
		case reflect.Uint64, reflect.Uint:
			v.SetUint(1<<63 | uint64(n))
		case reflect.Uint8:
			v.SetUint(uint64(n))
		case reflect.Uint16:
			v.SetUint(uint64(0xff00 + n)) // a port: never 0
		case reflect.Ptr:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range v.Len() {
				fill(v.Index(i))
			}
		case reflect.Array:
			for i := range v.Len() {
				fill(v.Index(i))
			}
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			for range 2 {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(k)
				fill(e)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		default:
			panic(fmt.Sprintf("fillPlan: no filler for %s", v.Type()))
		}
	}
	fill(reflect.ValueOf(&p).Elem())
	return &p
}

// TestPlanCodecCoversEveryField: every field of the plan survives the
// trip between the stages, including one added to Plan later.
func TestPlanCodecCoversEveryField(t *testing.T) {
	p := fillPlan()
	got, err := decodePlan(encodePlan(p))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("plan changed across the stages:\n got %+v\nwant %+v", got, p)
	}
}

// TestPlanCodecValidated: a plan as Validate makes it, with what stage 0
// adds, survives the trip; nil and empty seccomp programs stay apart
// (nil is "no filter", empty is a malformed one that stage 2 refuses).
func TestPlanCodecValidated(t *testing.T) {
	p, err := Validate(goodSpec(), 2, hostUID, hostGID)
	if err != nil {
		t.Fatal(err)
	}
	umask := uint32(0o22)
	p.Process.Umask = &umask
	p.UserBudgets = map[string]int{"max_user_namespaces": 7, "max_inotify_watches": 100}
	p.UsernsFD = 7
	for _, prog := range [][]byte{nil, {}, bytes.Repeat([]byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}, 300)} {
		p.Process.Seccomp = prog
		got, err := decodePlan(encodePlan(p))
		if err != nil {
			t.Fatal(err)
		}
		if (got.Process.Seccomp == nil) != (prog == nil) || !bytes.Equal(got.Process.Seccomp, prog) {
			t.Errorf("seccomp %v came back as %v", prog, got.Process.Seccomp)
		}
		if !bytes.Equal(encodePlan(got), encodePlan(p)) {
			t.Errorf("plan changed across the stages:\n got %+v\nwant %+v", got, p)
		}
	}
}

// planRefusal is one input of the decoders' bad-input table.
type planRefusal struct {
	name string
	in   []byte
}

// planRefusals are bytes the encoder would not have written: the Go
// decoder (TestDecodePlanRefuses) and the C one (TestCDecodePlanRefuses)
// must refuse each.
func planRefusals(t testing.TB) []planRefusal {
	good := encodePlan(fillPlan())
	if _, err := decodePlan(good); err != nil {
		t.Fatalf("the good plan: %v", err)
	}
	// The budgets' place: a plan whose only non-empty field is them.
	budgetsEgress := func(ports []uint64, names ...string) []byte {
		e := planEncoder{b: []byte(planMagic)}
		e.int(0)                         // PreserveFDs
		e.str("")                        // Hostname
		e.uint(0)                        // UID
		e.uint(0)                        // GID
		e.uint(0)                        // HostUID
		e.uint(0)                        // HostGID
		e.bool(false)                    // RootReadonly
		e.bool(false)                    // RootTmpfs
		e.uint(0)                        // Mounts
		e.strs(nil)                      // Masked
		e.strs(nil)                      // Readonly
		e.strs(nil)                      // Args
		e.strs(nil)                      // Env
		e.str("")                        // Cwd
		e.bool(false)                    // Terminal
		e.bool(false)                    // Umask
		e.uint(0)                        // Rlimits
		e.bool(false)                    // Seccomp
		e.uint(0)                        // SeccompFlags
		e.int(0)                         // SeccompListenerFD
		e.bytes(nil)                     // DenyIoctls
		e.uint(0)                        // PassFDs
		e.b = append(e.b, 0, 0, 0, 0, 0) // Caps
		e.strs(nil)                      // Writable
		e.strs(nil)                      // WritableFile
		e.strs(nil)                      // Off
		e.str("")                        // RootPath
		e.b = append(e.b, 0, 0)          // RootIdent
		e.uint(uint64(len(names)))       // UserBudgets
		for _, n := range names {
			e.str(n)
			e.int(1)
		}
		e.uint(0) // RootEntries
		e.int(0)  // EgressHandoffFD
		e.uint(uint64(len(ports)))
		for _, p := range ports {
			e.uint(p)
		}
		e.int(0) // UsernsFD
		return e.b
	}
	budgets := func(names ...string) []byte { return budgetsEgress(nil, names...) }
	if _, err := decodePlan(budgetsEgress([]uint64{1, 65535})); err != nil {
		t.Fatalf("egress ports 1 and 65535: %v", err)
	}
	if _, err := decodePlan(budgets("a", "b")); err != nil {
		t.Fatalf("budgets in order: %v", err)
	}
	empty := budgets()
	// Offsets in empty: the magic, then PreserveFDs (one byte), then the
	// Hostname's length.
	m := len(planMagic)
	with := func(at int, b ...byte) []byte {
		out := append([]byte{}, empty[:at]...)
		out = append(out, b...)
		return append(out, empty[at:]...)
	}
	set := func(at int, c byte) []byte {
		out := append([]byte{}, empty...)
		out[at] = c
		return out
	}
	// UID (after PreserveFDs and the empty Hostname) of 2^32.
	over := append([]byte{}, empty[:m+2]...)
	over = binary.AppendUvarint(over, 1<<32)
	over = append(over, empty[m+3:]...)
	cases := []planRefusal{
		{"nothing", nil},
		{"JSON", []byte(`{"PreserveFDs":0}`)},
		{"magic only", []byte(planMagic)},
		{"wrong magic", append([]byte("glove-plan-6\n"), empty[m:]...)},
		{"previous magic", append([]byte("glove-plan-4\n"), empty[m:]...)},
		{"trailing byte", append(append([]byte{}, empty...), 0)},
		{"unsigned not shortest", with(m+1, 0x80)},      // Hostname length 0 as 0x80 0x00
		{"signed not shortest", set(m, 0x80)},           // PreserveFDs 0x80 0x00 ...
		{"string longer than the rest", set(m+1, 0x7f)}, // Hostname of 127 bytes
		{"uid over 32 bits", over},
		{"boolean 2", set(m+6, 2)}, // RootReadonly
		{"varint overflow", append([]byte(planMagic), bytes.Repeat([]byte{0xff}, 11)...)},
		{"budgets out of order", budgets("b", "a")},
		{"budget twice", budgets("a", "a")},
		{"NUL in a string", budgets("a\x00b")},
		{"egress port 0", budgetsEgress([]uint64{0})},
		{"egress port over 16 bits", budgetsEgress([]uint64{65536})},
		// UsernsFD, the last field, 0 as 0x80 0x00.
		{"userns descriptor not shortest", append(append([]byte{}, empty[:len(empty)-1]...), 0x80, 0)},
		{"userns descriptor missing", empty[:len(empty)-1]},
	}
	for i := range good {
		cases = append(cases, planRefusal{fmt.Sprintf("truncated at %d", i), good[:i]})
	}
	return cases
}

// TestDecodePlanRefuses: bytes the encoder would not have written are
// refused, each with errPlan.
func TestDecodePlanRefuses(t *testing.T) {
	for _, c := range planRefusals(t) {
		p, err := decodePlan(c.in)
		if err == nil || !errors.Is(err, errPlan) || p != nil {
			t.Errorf("%s: decodePlan = %v, %v; want errPlan", c.name, p, err)
		}
	}
}

// FuzzDecodePlan: arbitrary bytes never panic the decoder, and whatever
// it accepts is exactly what the encoder writes for the decoded plan (one
// plan, one encoding: nothing is silently dropped or normalized).
func FuzzDecodePlan(f *testing.F) {
	f.Add(encodePlan(fillPlan()))
	if p, err := Validate(goodSpec(), 2, hostUID, hostGID); err == nil {
		p.Process.Seccomp = []byte{6, 0, 0, 0, 0, 0, 0xff, 0x7f}
		f.Add(encodePlan(p))
	}
	f.Add([]byte(planMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePlan(data)
		if err != nil {
			if !errors.Is(err, errPlan) {
				t.Fatalf("error without errPlan: %v", err)
			}
			return
		}
		if back := encodePlan(p); !bytes.Equal(back, data) {
			t.Fatalf("accepted bytes that encode differently:\n in %q\nout %q", data, back)
		}
	})
}
