// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"golang.org/x/sys/unix"
)

// sockaddr is a struct sockaddr_un of family fam and path bytes p, as a
// program would pass connect(2).
func sockaddr(fam uint16, p string) []byte {
	return append(binary.NativeEndian.AppendUint16(nil, fam), p...)
}

func TestParseConnectAddr(t *testing.T) {
	dir := session.ServiceDirTarget + "/"
	good := []struct {
		name string
		b    []byte
		want string
	}{
		{"alias", sockaddr(unix.AF_UNIX, dir+"model"), "model"},
		{"NUL-terminated", sockaddr(unix.AF_UNIX, dir+"model\x00"), "model"},
		{"bytes after the NUL", sockaddr(unix.AF_UNIX, dir+"model\x00/../../etc"), "model"},
		{"identifier characters", sockaddr(unix.AF_UNIX, dir+"a.b_c-9"), "a.b_c-9"},
	}
	for _, c := range good {
		got, err := parseConnectAddr(c.b)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	bad := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "shorter than its family"},
		{"one byte", []byte{1}, "shorter than its family"},
		{"too long", sockaddr(unix.AF_UNIX, dir+strings.Repeat("a", 200)), "longer than sockaddr_un"},
		{"inet", sockaddr(unix.AF_INET, dir+"model"), "not AF_UNIX"},
		{"netlink", sockaddr(unix.AF_NETLINK, ""), "not AF_UNIX"},
		{"unnamed", sockaddr(unix.AF_UNIX, ""), "unnamed"},
		{"abstract", sockaddr(unix.AF_UNIX, "\x00"+dir+"model"), "abstract"},
		{"relative", sockaddr(unix.AF_UNIX, "model"), "not the path"},
		{"the directory", sockaddr(unix.AF_UNIX, session.ServiceDirTarget), "not the path"},
		{"the directory with a slash", sockaddr(unix.AF_UNIX, dir), "not the path"},
		{"dot-dot", sockaddr(unix.AF_UNIX, dir+".."), "not the path"},
		{"dot", sockaddr(unix.AF_UNIX, dir+"."), "not the path"},
		{"a second slash", sockaddr(unix.AF_UNIX, dir+"model/x"), "not the path"},
		{"through dot-dot", sockaddr(unix.AF_UNIX, dir+"../local/model"), "not the path"},
		{"double slash", sockaddr(unix.AF_UNIX, session.ServiceDirTarget+"//model"), "not the path"},
		{"by /proc", sockaddr(unix.AF_UNIX, "/proc/self/root"+dir+"model"), "not the path"},
		{"another socket", sockaddr(unix.AF_UNIX, "/run/dbus/system_bus_socket"), "not the path"},
		{"upper case", sockaddr(unix.AF_UNIX, dir+"Model"), "not the path"},
		{"a sibling directory", sockaddr(unix.AF_UNIX, "/run/glove-services/localx/model"), "not the path"},
		{"NUL in the prefix", sockaddr(unix.AF_UNIX, "/run/glove\x00-services/local/model"), "not the path"},
	}
	for _, c := range bad {
		got, err := parseConnectAddr(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %q, %v; want an error with %q", c.name, got, err, c.want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: the error is not one line: %q", c.name, err)
		}
	}
}

// FuzzParseConnectAddr: whatever the program's bytes, an accepted
// address names exactly ServiceDirTarget/<identifier>, up to its NUL.
func FuzzParseConnectAddr(f *testing.F) {
	f.Add(sockaddr(unix.AF_UNIX, session.ServiceDirTarget+"/model"))
	f.Add(sockaddr(unix.AF_UNIX, "\x00abstract"))
	f.Add(sockaddr(unix.AF_UNIX, session.ServiceDirTarget+"/../x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		alias, err := parseConnectAddr(b)
		if err != nil {
			return
		}
		p := string(b[2:])
		if i := strings.IndexByte(p, 0); i >= 0 {
			p = p[:i]
		}
		if p != session.ServiceDirTarget+"/"+alias || strings.ContainsAny(alias, "/\x00") || alias == "." || alias == ".." || alias == "" {
			t.Fatalf("accepted %q as alias %q", b, alias)
		}
	})
}
