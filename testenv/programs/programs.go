// Package programs holds the sources of the programs the integration
// tests run as a session's harness or as an upstream service. They are
// Go main packages built with testenv.BuildStatic; they live here, not in
// the tests, so that a prebuilt run (the VM lane, whose guests have no Go
// toolchain) can have them built ahead of time (testenv.Prebuild).
package programs

// Harness stands in for an agent harness in gloved's tests; with the
// argument "sleep" it waits instead, with "line" it prints one line and
// exits 0, with "spin" it burns CPU, with
// "stubborn" it ignores SIGTERM and waits, with "flood" and "hog" it
// prints a line, waits a second, then writes output or takes memory
// without end; with "retain" it writes /workspace/out and waits, with
// "streamwait" it makes one exchange on its stream and waits, with "ls
// DIR" it lists DIR, with "mountinfo" it prints its mount table, with
// "services" it prints what it has of local services (its
// GLOVE_LOCAL_SERVICE_* variables, whether descriptor 3 is open) and, if
// descriptor 3 is open, makes one exchange on it.
const Harness = `package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

// stream is the sandboxed side of inherited-stream-v1: descriptor 3.
func stream() {
	fmt.Println("env", os.Getenv("GLOVE_LOCAL_SERVICE_FDS_V1"))
	typ, err := syscall.GetsockoptInt(3, syscall.SOL_SOCKET, syscall.SO_TYPE)
	fmt.Println("so_type", typ, err)
	_, err = syscall.Getsockname(3)
	fmt.Println("getsockname", err)
	_, err = syscall.GetsockoptInt(3, syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	fmt.Println("rcvbuf", err)
	_, err = syscall.GetsockoptInt(0, syscall.SOL_SOCKET, syscall.SO_TYPE)
	fmt.Println("other fd", err)
	_, err = syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	fmt.Println("socket", err)
	f := os.NewFile(3, "stream")
	for _, msg := range []string{"ping", "again"} {
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
		if _, err := f.Write(append(frame, msg...)); err != nil {
			fmt.Println("write", err)
			os.Exit(1)
		}
		var hdr [4]byte
		if _, err := io.ReadFull(f, hdr[:]); err != nil {
			fmt.Println("read", err)
			os.Exit(1)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(f, body); err != nil {
			fmt.Println("read", err)
			os.Exit(1)
		}
		fmt.Println("reply", string(body))
		time.Sleep(50 * time.Millisecond) // no pipelining: see relay's post-send rule
	}
}

// exchange sends msg as one frame on descriptor 3 and reads the reply.
func exchange(f *os.File, msg string) (string, error) {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(msg)))
	if _, err := f.Write(append(frame, msg...)); err != nil {
		return "", err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return "", err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	_, err := io.ReadFull(f, body)
	return string(body), err
}

// streamWait makes one exchange, then waits on the stream: when it is
// cut it says so and waits on (its wall limit ends it).
func streamWait() {
	f := os.NewFile(3, "stream")
	reply, err := exchange(f, "ping")
	fmt.Println("first reply", reply, err)
	if err == nil {
		var b [1]byte
		_, err = f.Read(b[:])
		fmt.Println("stream cut:", err)
	}
	time.Sleep(60 * time.Second)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "stream" {
		stream()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "line" {
		fmt.Println("ready")
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "spin" {
		fmt.Println("spinning")
		for {
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring")
		time.Sleep(60 * time.Second)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "flood" {
		fmt.Println("flooding soon")
		time.Sleep(time.Second)
		line := []byte("flood flood flood flood flood flood flood flood flood flood flood\n")
		for {
			os.Stdout.Write(line)
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "hog" {
		fmt.Println("hogging soon")
		time.Sleep(time.Second)
		var kept [][]byte
		for {
			b := make([]byte, 16<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			kept = append(kept, b)
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "retain" {
		// A retained_write session's program: its write is kept in
		// the image, and it outlives SIGTERM.
		signal.Ignore(syscall.SIGTERM)
		err := os.WriteFile("/workspace/out", []byte("written"), 0o644)
		fmt.Println("retain write", err)
		time.Sleep(60 * time.Second)
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "ls" {
		ents, err := os.ReadDir(os.Args[2])
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		fmt.Println("entries", names, err)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "mountinfo" {
		// Each mount's source within its filesystem, its mount point and
		// its type: what a test looks through for host paths.
		data, err := os.ReadFile("/proc/self/mountinfo")
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(l)
			if i := slices.Index(f, "-"); i > 4 && i+1 < len(f) {
				fmt.Println("mount", f[3], f[4], f[i+1])
			}
		}
		fmt.Println("mountinfo read", err)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "services" {
		vars := []string{}
		for _, kv := range os.Environ() {
			if strings.HasPrefix(kv, "GLOVE_LOCAL_SERVICE_") {
				vars = append(vars, kv)
			}
		}
		fmt.Println("service vars", vars)
		_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, 3, syscall.F_GETFD, 0)
		fmt.Println("fd3", errno)
		if errno == 0 {
			reply, err := exchange(os.NewFile(3, "stream"), "ping")
			fmt.Println("reply", reply, err)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "streamwait" {
		streamWait()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "sleep" {
		fmt.Println("sleeping")
		time.Sleep(60 * time.Second)
		return
	}
	fmt.Printf("args=%q home=%s cwd=", os.Args[1:], os.Getenv("HOME"))
	wd, _ := os.Getwd()
	fmt.Println(wd)
	data, err := os.ReadFile("/workspace/in")
	fmt.Printf("in=%q err=%v\n", data, err)
	os.Exit(7)
}
`

// Upstream is the upstream service of gloved's stream tests: it listens
// on a unix socket and answers each frame with "pong:" and the payload;
// given a second argument, it appends a line "accept" to that file for
// each connection it accepts (what a test judges from outside).
const Upstream = `package main

import (
	"encoding/binary"
	"io"
	"net"
	"os"
)

func main() {
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		panic(err)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if len(os.Args) > 2 {
			f, err := os.OpenFile(os.Args[2], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				panic(err)
			}
			if _, err := f.WriteString("accept\n"); err != nil {
				panic(err)
			}
			if err := f.Close(); err != nil {
				panic(err)
			}
		}
		go func(c net.Conn) {
			defer c.Close()
			for {
				var hdr [4]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				if _, err := io.ReadFull(c, body); err != nil {
					return
				}
				out := append([]byte("pong:"), body...)
				c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...))
			}
		}(c)
	}
}
`

// All are the programs a prebuilt run carries, by the name their tests
// build them under.
var All = map[string]string{"harness": Harness, "upstream": Upstream}
