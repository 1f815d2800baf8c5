// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"golang.org/x/sys/unix"
)

// TestExposedBy is the exposure check's attack table, on descriptors as a
// launch opens its grants: the upstream socket, its directory and each
// ancestor are refused however they were reached (a symbolic link, ".."
// in the path, a bind mount of the directory elsewhere), and what does
// not hold the socket passes (a subdirectory and a sibling of it, a file,
// another socket, a directory beside the tree).
func TestExposedBy(t *testing.T) {
	base := t.TempDir()
	svc := filepath.Join(base, "svc")
	for _, d := range []string{svc, filepath.Join(svc, "sub"), filepath.Join(base, "other")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(svc, "up.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other, err := net.Listen("unix", filepath.Join(base, "other", "else.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := os.WriteFile(filepath.Join(svc, "file"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(svc, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	e, err := openEndpoint(localservice.Service{Alias: "sage", Socket: sock, RuntimeIDs: []string{"codex"}})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(e.parent)
	refused := map[string]string{
		"the socket":                   sock,
		"its directory":                svc,
		"its parent":                   base,
		"the root":                     "/",
		"its directory by a link":      filepath.Join(base, "link"),
		"its directory by ..":          filepath.Join(svc, "sub", ".."),
		"its parent by .. from beside": filepath.Join(base, "other", ".."),
	}
	passed := map[string]string{
		"a subdirectory":   filepath.Join(svc, "sub"),
		"a sibling":        filepath.Join(base, "other"),
		"a file beside it": filepath.Join(svc, "file"),
		"another socket":   filepath.Join(base, "other", "else.sock"),
		"another tree":     "/usr",
	}
	// A bind mount of its directory: another name on another mount, the
	// same inode (root only: mounting needs CAP_SYS_ADMIN).
	if os.Getuid() == 0 {
		bind := filepath.Join(base, "bind")
		if err := os.Mkdir(bind, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(svc, bind, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount: %v", err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(bind, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", bind, err)
			}
		})
		refused["its directory by a bind mount"] = bind
	} else {
		t.Log("not root: the bind-mount case is not tried (mounting needs CAP_SYS_ADMIN)")
	}
	check := func(name, path string) error {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("%s: open %s: %v", name, path, err)
		}
		defer unix.Close(fd)
		return e.exposedBy(fd)
	}
	for name, path := range refused {
		if err := check(name, path); !errors.Is(err, ErrExposed) {
			t.Errorf("%s (%s): %v, want refused (ErrExposed)", name, path, err)
		}
	}
	for name, path := range passed {
		if err := check(name, path); err != nil {
			t.Errorf("%s (%s): %v, want it to pass", name, path, err)
		}
	}
	// The link itself, as a bind opens a host path whose last component
	// is a link (O_PATH|O_NOFOLLOW): not followed, so refused.
	fd, err := unix.Open(filepath.Join(base, "link"), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := e.exposedBy(fd); !errors.Is(err, ErrExposed) {
		t.Errorf("the link itself: %v, want refused (ErrExposed)", err)
	}
}
