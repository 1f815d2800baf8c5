// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"golang.org/x/sys/unix"
)

// What the tests of retained images share: where an image is attached,
// waiting for its loop device to go, and reading it back as an inspector
// would.

// LoopsBackedIn lists the loop devices whose backing file lies in dir.
func LoopsBackedIn(dir string) []string {
	paths, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(string(b), dir+"/") {
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out
}

// WaitImagesDetached waits until no loop device is backed by a file in
// dir: an autoclear device unbinds asynchronously after its last mount
// reference goes. It fails the test after 10 s.
func WaitImagesDetached(t testing.TB, dir string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := LoopsBackedIn(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices still attached 10 s after the session: %v", left)
			return
		}
	}
}

// ImageRead is one file read back from an image: its bytes, or why not.
type ImageRead struct {
	Data string
	Err  error
}

// ReadImage reads files from the image name in dir, attached read-only
// once by a glove-loopext4 of the test's own, as an inspector would. The
// mount is closed when it returns (the loop device then unbinds itself:
// WaitImagesDetached before attaching the image again).
func (e *Env) ReadImage(t testing.TB, dir, name string, files ...string) []ImageRead {
	t.Helper()
	lx, log := e.StartServing(t, "glove-loopext4")
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	_, fds, err := wirecall.Call(loopwire.Attach, lx.Client, &loopwire.AttachRequest{Name: name, ReadOnly: true}, []int{root})
	if err != nil || len(fds) != 1 {
		t.Fatalf("attach %s read-only: %v (%d descriptors)\nhelper log: %s", name, err, len(fds), log)
	}
	defer fds[0].Close()
	out := make([]ImageRead, len(files))
	for i, file := range files {
		fd, err := unix.Openat(int(fds[0].Fd()), file, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			out[i].Err = err
			continue
		}
		f := os.NewFile(uintptr(fd), file)
		var b bytes.Buffer
		_, out[i].Err = b.ReadFrom(f)
		out[i].Data = b.String()
		f.Close()
	}
	return out
}
