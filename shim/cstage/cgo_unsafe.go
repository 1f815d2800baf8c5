// SPDX-License-Identifier: Apache-2.0

// Package cstage holds the C stages of glove-shim: code that runs in the
// sandbox's processes before the Go runtime exists (a C constructor, run
// by glibc before Go's own start-up), so that those stages pay for no Go
// start-up. glove-shim links it with a blank import; nothing else does.
//
// This file is the only Go that touches C: Decode exposes the C plan
// decoder to the tests, which compare it with the Go decoder (shim's
// FuzzCDecodePlan), and JoinParse the parser of --cgroup-join (shim's
// FuzzCJoinParse).
package cstage

// #cgo CFLAGS: -O2 -Wall -Wextra -Werror -std=gnu11
// #include <stdlib.h>
// #include "plan.h"
// #include "cstage.h"
import "C"

import (
	"errors"
	"unsafe"

	"github.com/glove-sandbox/glove/shim"
)

// JoinParse parses spec, `--cgroup-join`'s value, with the C parser
// (join.c) and returns S followed by the Ts, or nil when it refuses it.
func JoinParse(spec string) []int {
	cs := C.CString(spec)
	defer C.free(unsafe.Pointer(cs))
	var sync, n C.int
	var tasks [C.GLOVE_JOIN_MAX]C.int
	if C.glove_join_parse(cs, &sync, &tasks[0], &n) != 0 {
		return nil
	}
	out := []int{int(sync)}
	for _, t := range tasks[:n] {
		out = append(out, int(t))
	}
	return out
}

// Decode decodes b with the C decoder and returns the plan as Go values,
// or the C decoder's refusal.
func Decode(b []byte) (*shim.Plan, error) {
	cb := C.CBytes(b)
	defer C.free(cb)
	var cp C.struct_glove_plan
	var errbuf [256]C.char
	if C.glove_plan_decode((*C.uchar)(cb), C.size_t(len(b)), &cp, &errbuf[0], C.size_t(len(errbuf))) != 0 {
		return nil, errors.New(C.GoString(&errbuf[0]))
	}
	defer C.glove_plan_free(&cp)
	p := &shim.Plan{
		PreserveFDs:  int(cp.preserve_fds),
		Hostname:     C.GoString(cp.hostname),
		UID:          uint32(cp.uid),
		GID:          uint32(cp.gid),
		HostUID:      uint32(cp.host_uid),
		HostGID:      uint32(cp.host_gid),
		RootReadonly: cp.root_readonly != 0,
		RootTmpfs:    cp.root_tmpfs != 0,
		Masked:       strs(cp.masked),
		Readonly:     strs(cp.readonly),
		Off:          strs(cp.off),
		RootPath:     C.GoString(cp.root_path),
		RootIdent:    shim.Ident{Dev: uint64(cp.root_ident.dev), Ino: uint64(cp.root_ident.ino)},
	}
	for _, m := range unsafe.Slice(cp.mounts, cp.nmounts) {
		mp := shim.MountPlan{
			Destination: C.GoString(m.destination),
			Kind:        C.GoString(m.kind),
			SourcePath:  C.GoString(m.source_path),
			SourceIdent: shim.Ident{Dev: uint64(m.source_ident.dev), Ino: uint64(m.source_ident.ino)},
			SourceFD:    int(m.source_fd),
			SourceSub:   C.GoString(m.source_sub),
			Recursive:   m.recursive != 0,
			Attr:        uint64(m.attr),
			Writable:    m.writable != 0,
			FileTarget:  m.file_target != 0,
		}
		for _, kv := range unsafe.Slice(m.config, m.nconfig) {
			mp.Config = append(mp.Config, [2]string{C.GoString(kv[0]), C.GoString(kv[1])})
		}
		p.Mounts = append(p.Mounts, mp)
	}
	cpp := &cp.process
	pp := &p.Process
	pp.Args, pp.Env = strs(cpp.args), strs(cpp.env)
	pp.Cwd = C.GoString(cpp.cwd)
	pp.Terminal = cpp.terminal != 0
	if cpp.has_umask != 0 {
		u := uint32(cpp.umask)
		pp.Umask = &u
	}
	for _, r := range unsafe.Slice(cpp.rlimits, cpp.nrlimits) {
		pp.Rlimits = append(pp.Rlimits, shim.Rlimit{Resource: int(r.resource), Soft: uint64(r.soft), Hard: uint64(r.hard)})
	}
	if cpp.has_seccomp != 0 {
		pp.Seccomp = C.GoBytes(unsafe.Pointer(cpp.seccomp), C.int(cpp.seccomp_len))
	}
	pp.SeccompFlags = uint(cpp.seccomp_flags)
	pp.SeccompListenerFD = int(cpp.seccomp_listener_fd)
	if cpp.deny_ioctls_len > 0 {
		pp.DenyIoctls = C.GoBytes(unsafe.Pointer(cpp.deny_ioctls), C.int(cpp.deny_ioctls_len))
	}
	for _, fd := range unsafe.Slice(cpp.pass_fds, cpp.npass_fds) {
		pp.PassFDs = append(pp.PassFDs, int(fd))
	}
	pp.Caps = shim.CapSets{Bounding: uint64(cpp.cap_bounding), Effective: uint64(cpp.cap_effective),
		Inheritable: uint64(cpp.cap_inheritable), Permitted: uint64(cpp.cap_permitted), Ambient: uint64(cpp.cap_ambient)}
	pp.Writable, pp.WritableFile = strs(cpp.writable), strs(cpp.writable_file)
	if cp.nbudgets > 0 {
		p.UserBudgets = map[string]int{}
		for _, b := range unsafe.Slice(cp.budgets, cp.nbudgets) {
			p.UserBudgets[C.GoString(b.name)] = int(b.value)
		}
	}
	for _, r := range unsafe.Slice(cp.root_entries, cp.nroot_entries) {
		p.RootEntries = append(p.RootEntries, shim.RootEntry{Name: C.GoString(r.name), Link: C.GoString(r.link), Dir: r.dir != 0})
	}
	p.EgressHandoffFD = int(cp.egress_handoff_fd)
	for _, port := range unsafe.Slice(cp.egress_ports, cp.negress_ports) {
		p.EgressPorts = append(p.EgressPorts, uint16(port))
	}
	p.UsernsFD = int(cp.userns_fd)
	return p, nil
}

func strs(s C.struct_gp_strs) []string {
	var out []string
	for _, c := range unsafe.Slice(s.v, s.n) {
		out = append(out, C.GoString(c))
	}
	return out
}
