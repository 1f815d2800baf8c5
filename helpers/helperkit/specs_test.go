// SPDX-License-Identifier: Apache-2.0

package helperkit_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/helpers/streamproxy"
	"github.com/glove-sandbox/glove/helpers/userns"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

var specs = []func() helperkit.Spec{mounter.Spec, loopext4.Spec, cgroup.Spec, streamproxy.Spec, userns.Spec}

// TestSpecsMatchTables ties each helper to the capability table and the
// wire dispatch table, so neither can drift from the code.
func TestSpecsMatchTables(t *testing.T) {
	files := map[string]bool{}
	for _, f := range specs {
		s := f()
		row, ok := captable.Lookup(s.Name)
		if !ok || !row.Helper {
			t.Errorf("%s: no helper row in the capability table", s.Name)
		}
		if files[row.Bounds] {
			t.Errorf("%s: configuration file %s shared with another helper", s.Name, row.Bounds)
		}
		files[row.Bounds] = true
		if s.Protocol == nil || s.Protocol.Name != s.Name {
			t.Errorf("%s: no protocol of its name", s.Name)
			continue
		}
		handled := map[wire.MsgType]bool{wire.MsgHello: true}
		if s.Handlers != nil {
			hs, err := s.Handlers(&unix.Ucred{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
			if err != nil {
				// Handlers may open bound resources that need the
				// helper's configuration; the message set is then
				// checked by the integration tests.
				t.Logf("%s: handlers not built here: %v", s.Name, err)
				continue
			}
			for _, h := range hs {
				handled[h.Type()] = true
			}
		}
		accepts := s.Protocol.Routes()
		if len(accepts) != len(handled) {
			t.Errorf("%s: handles %d message types, its protocol declares %d", s.Name, len(handled), len(accepts))
		}
		for _, d := range accepts {
			if a := d.Type(); !handled[a] {
				t.Errorf("%s: protocol declares %#04x, no handler", s.Name, uint16(a))
			}
		}
		if _, err := bpf.Compile(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), s.Syscalls...),
			bpf.Action(unix.SECCOMP_RET_KILL_PROCESS)); err != nil {
			t.Errorf("%s: seccomp allowlist does not compile: %v", s.Name, err)
		}
	}
}

// TestTestenvConfigsValidate checks the test environment's bounds pass
// each helper's validation, so integration tests start real helpers.
func TestTestenvConfigsValidate(t *testing.T) {
	cfgs := testenv.DefaultConfigs("/var/lib/glove-testenv/run-x")
	for _, f := range specs {
		s := f()
		row := captable.MustLookup(s.Name)
		raw, ok := cfgs[row.Bounds]
		if !ok {
			t.Errorf("%s: testenv writes no %s", s.Name, row.Bounds)
			continue
		}
		data, _ := json.Marshal(raw)
		if err := helperkit.DecodeStrict(data, s.Config); err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if err := s.Config.Validate(); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

// TestConfigValidation is the bad-bounds table of every helper.
func TestConfigValidation(t *testing.T) {
	cases := []struct {
		spec    func() helperkit.Spec
		json    string
		wantErr string // "" means valid
	}{
		{mounter.Spec, `{"schema_version":1,"source_roots":["/srv","/usr"],"max_tmpfs_bytes":1048576,"max_tmpfs_inodes":64}`, ""},
		{mounter.Spec, `{"schema_version":1,"source_roots":[],"max_tmpfs_bytes":1,"max_tmpfs_inodes":1}`, "source_roots: empty"},
		{mounter.Spec, `{"schema_version":1,"source_roots":["/usr","/srv"],"max_tmpfs_bytes":1,"max_tmpfs_inodes":1}`, "not sorted"},
		{mounter.Spec, `{"schema_version":1,"source_roots":["/usr","/usr/lib"],"max_tmpfs_bytes":1,"max_tmpfs_inodes":1}`, "lies beneath"},
		{mounter.Spec, `{"schema_version":1,"source_roots":["usr"],"max_tmpfs_bytes":1,"max_tmpfs_inodes":1}`, "clean absolute"},
		{mounter.Spec, `{"schema_version":1,"source_roots":["/usr"],"max_tmpfs_bytes":0,"max_tmpfs_inodes":1}`, "max_tmpfs_bytes"},
		{mounter.Spec, `{"schema_version":1,"source_roots":["/usr"],"max_tmpfs_bytes":1,"max_tmpfs_inodes":99999999999}`, "max_tmpfs_inodes"},
		{loopext4.Spec, `{"schema_version":1,"materialization_root":"/var/lib/glove/images","max_image_bytes":67108864}`, ""},
		{loopext4.Spec, `{"schema_version":1,"materialization_root":"/var/lib/glove/../images","max_image_bytes":1}`, "materialization_root"},
		{loopext4.Spec, `{"schema_version":1,"materialization_root":"/i","max_image_bytes":2199023255552}`, "max_image_bytes"},
		{loopext4.Spec, `{"schema_version":0,"materialization_root":"/i","max_image_bytes":1}`, "schema_version"},
		{cgroup.Spec, `{"schema_version":1,"parent":"/glove","max_memory_bytes":1073741824,"max_pids":64}`, ""},
		{cgroup.Spec, `{"schema_version":1,"parent":"/","max_memory_bytes":1,"max_pids":1}`, "root cgroup"},
		{cgroup.Spec, `{"schema_version":1,"parent":"glove","max_memory_bytes":1,"max_pids":1}`, "parent"},
		{cgroup.Spec, `{"schema_version":1,"parent":"/glove","max_memory_bytes":1,"max_pids":0}`, "max_pids"},
		{streamproxy.Spec, `{"schema_version":1,"max_frame_bytes":16384,"max_exchange_ms":1000}`, ""},
		{streamproxy.Spec, `{"schema_version":1,"max_frame_bytes":16385,"max_exchange_ms":1000}`, "max_frame_bytes"},
		{streamproxy.Spec, `{"schema_version":1,"max_frame_bytes":1,"max_exchange_ms":600001}`, "max_exchange_ms"},
		{userns.Spec, `{"schema_version":1,"enabled":false}`, ""},
		{userns.Spec, `{"schema_version":1,"enabled":true}`, ""},
		{userns.Spec, `{"schema_version":2,"enabled":true}`, "schema_version"},
		{userns.Spec, `{"schema_version":1,"enabled":"yes"}`, "enabled"},
		{userns.Spec, `{"schema_version":1,"enabled":true,"max_namespaces":3}`, "max_namespaces"},
	}
	for _, c := range cases {
		s := c.spec()
		err := helperkit.DecodeStrict([]byte(c.json), s.Config)
		if err == nil {
			err = s.Config.Validate()
		}
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s %s: %v", s.Name, c.json, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s %s: error %v, want %q", s.Name, c.json, err, c.wantErr)
		}
	}
}
