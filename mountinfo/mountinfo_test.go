// SPDX-License-Identifier: Apache-2.0

package mountinfo

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const sample = `22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
31 22 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,memory
32 22 0:28 /sub /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,xattr,clone_children,pids,release_agent=/x
40 1 254:0 /srv/a\040b /mnt/a\040b rw,relatime - ext4 /dev/vda rw
`

func TestParse(t *testing.T) {
	got := Parse(sample)
	want := []Entry{
		{ID: 22, Parent: 1, Root: "/", Point: "/sys", Options: "rw,nosuid,nodev,noexec,relatime", FSType: "sysfs", Source: "sysfs", SuperOptions: "rw"},
		{ID: 30, Parent: 22, Root: "/", Point: "/sys/fs/cgroup/unified", Options: "rw,nosuid,nodev,noexec,relatime", FSType: "cgroup2", Source: "cgroup2", SuperOptions: "rw,nsdelegate"},
		{ID: 31, Parent: 22, Root: "/", Point: "/sys/fs/cgroup/memory", Options: "rw,nosuid,nodev,noexec,relatime", FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,memory"},
		{ID: 32, Parent: 22, Root: "/sub", Point: "/sys/fs/cgroup/pids", Options: "rw,relatime", FSType: "cgroup", Source: "cgroup", SuperOptions: "rw,xattr,clone_children,pids,release_agent=/x"},
		{ID: 40, Parent: 1, Root: `/srv/a\040b`, Point: `/mnt/a\040b`, Options: "rw,relatime", FSType: "ext4", Source: "/dev/vda", SuperOptions: "rw"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
	if c := got[3].CgroupControllers(); !reflect.DeepEqual(c, []string{"pids"}) {
		t.Errorf("controllers %v", c)
	}
	if c := got[1].CgroupControllers(); c != nil {
		t.Errorf("a cgroup2 mount's controllers %v", c)
	}
	if u := Unescape(got[4].Point); u != "/mnt/a b" || !Escaped(got[4].Point) {
		t.Errorf("Unescape %q", u)
	}
}

// TestParseRefuses: lines that are not mountinfo lines yield nothing.
func TestParseRefuses(t *testing.T) {
	for _, l := range []string{
		"",
		"22 1 0:21 / /sys rw",
		"22 1 0:21 / /sys rw - sysfs",
		"x 1 0:21 / /sys rw - sysfs sysfs rw",
		"22 y 0:21 / /sys rw - sysfs sysfs rw",
		"22 1 0:21 / - rw sysfs sysfs rw",
		"-1 1 0:21 / /sys rw - sysfs sysfs rw",
		"22 1 0:21 / /sys rw shared:7 master:1",
	} {
		if got := Parse(l); len(got) != 0 {
			t.Errorf("Parse(%q) = %+v, want nothing", l, got)
		}
	}
}

func TestReadSelf(t *testing.T) {
	es, err := Read("/proc/self/mountinfo", 0)
	if err != nil {
		t.Fatal(err)
	}
	root := false
	for _, e := range es {
		root = root || e.Point == "/"
	}
	if !root {
		t.Errorf("no root mount among %d entries", len(es))
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.TrimSpace(string(data)), "\n") + 1; n != len(es) {
		t.Errorf("%d lines, %d entries", n, len(es))
	}
	if _, err := Read("/proc/self/mountinfo", 10); err == nil {
		t.Error("a 10-byte bound was not enforced")
	}
}

// FuzzParse: any text parses without panic, and each entry's fields are
// single words found in its line.
func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("1 2 3 4 5 6 - a b\n1 2 3 4 5 6 7 8 - a b c d")
	f.Fuzz(func(t *testing.T, text string) {
		for _, e := range Parse(text) {
			for _, s := range []string{e.Root, e.Point, e.Options, e.FSType, e.Source} {
				if s == "" || strings.ContainsAny(s, " \t\n") || !strings.Contains(text, s) {
					t.Fatalf("field %q of %+v", s, e)
				}
			}
		}
	})
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/sys/fs/cgroup`:       "/sys/fs/cgroup",
		`/mnt/a\040b`:          "/mnt/a b",
		`/mnt/tab\011x\134y`:   "/mnt/tab\tx\\y",
		`/mnt/trailing\04`:     `/mnt/trailing\04`,
		`/mnt/notoctal\999end`: `/mnt/notoctal\999end`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
