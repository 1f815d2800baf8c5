// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
)

// maxFrame is the largest frame the upstream accepts (glove-streamproxy's
// shipped bound).
const maxFrame = 16 << 10

// ReadFrame reads one inherited-stream-v1 frame: a 4-byte big-endian
// length, then the payload.
func ReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	body := make([]byte, n)
	_, err := io.ReadFull(r, body)
	return body, err
}

// Frame is the frame of payload.
func Frame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// Upstream serves the inherited stream's upstream on a unix socket: each
// frame is answered with prefix + payload + "\n" (a line the sandbox's
// shell can read); each request is logged to log as `got "PAYLOAD"`.
func Upstream(path, prefix string, log io.Writer) error {
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "listening on %s as uid %d\n", path, os.Getuid())
	var mu sync.Mutex
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func(c net.Conn) {
			defer c.Close()
			mu.Lock()
			fmt.Fprintln(log, "connection")
			mu.Unlock()
			for {
				body, err := ReadFrame(c)
				if err != nil {
					mu.Lock()
					fmt.Fprintf(log, "connection ends: %v\n", err)
					mu.Unlock()
					return
				}
				mu.Lock()
				fmt.Fprintf(log, "got %s\n", strconv.Quote(string(body)))
				mu.Unlock()
				if _, err := c.Write(Frame([]byte(prefix + string(body) + "\n"))); err != nil {
					return
				}
			}
		}(c)
	}
}

// ProbeUserns starts /bin/true in a new user namespace mapping the
// caller's ids, as an unprivileged sandbox would.
func ProbeUserns() error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	return cmd.Run()
}
