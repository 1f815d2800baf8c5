// SPDX-License-Identifier: Apache-2.0

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
// "connect PATH" it tries to reach the unix socket at PATH by its name,
// with "netprobe UDPADDR" it tries what an egress session must not do
// (netprobe below), with "tcp ADDR..." it connects to each TCP address in turn and makes one
// framed exchange (the upstream's framing) on each that answers, with
// "http URL" it gets URL following redirects,
// with "connects PATH..." each of them in turn,
// with "agent SRC DST [MODE]" it is a stand-in agent (agent below), with
// "envsum NAME SECS" it prints whether variable NAME is set and a SHA-256
// of its value (never the value) and waits SECS seconds, with "etc" it
// prints what it has of /etc (etcReport below), with
// "services" it prints what it has of local services (its
// GLOVE_LOCAL_SERVICE_* variables, whether descriptor 3 is open) and, if
// descriptor 3 is open, makes one exchange on it, with "terminal" it
// reports its terminal (terminal below), with "ids" it prints its uid
// map and user namespace.
const Harness = `package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// termSize is its terminal's size (TIOCGWINSZ on descriptor 0), as
// "ROWSxCOLS".
func termSize() string {
	var ws struct{ Row, Col, X, Y uint16 }
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, 0, syscall.TIOCGWINSZ, uintptr(unsafe.Pointer(&ws))); e != 0 {
		return "error " + e.Error()
	}
	return fmt.Sprintf("%dx%d", ws.Row, ws.Col)
}

// terminal reports what a program on a terminal sees: its size, its
// TERM, whether it can re-open its terminal by name for writing as a
// shell's "> /dev/stderr" does (each write's text then shows in the
// output), and whether /dev takes a new file or directory; then "ready",
// then its new size at each SIGWINCH, until it reads the line "done"
// (or a minute passes).
func terminal() {
	fmt.Println("size", termSize())
	fmt.Printf("term %q\n", os.Getenv("TERM"))
	for _, p := range []string{"/dev/stderr", "/dev/stdout", "/dev/tty", "/proc/self/fd/2"} {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
		if err == nil {
			_, err = fmt.Fprintf(f, "wrote-through %s\n", p)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		fmt.Println("reopen", p, err)
	}
	fmt.Println("create /dev/newfile", os.WriteFile("/dev/newfile", []byte("x"), 0o644))
	fmt.Println("mkdir /dev/newdir", os.Mkdir("/dev/newdir", 0o755))
	_, err := os.Lstat("/dev/newfile")
	fmt.Println("lstat /dev/newfile", err)
	winch := make(chan os.Signal, 8)
	signal.Notify(winch, syscall.SIGWINCH)
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(os.Stdin)
		for s.Scan() {
			lines <- strings.TrimSpace(s.Text())
		}
		close(lines)
	}()
	fmt.Println("ready")
	deadline := time.After(time.Minute)
	for {
		select {
		case <-winch:
			fmt.Println("resized", termSize())
		case l, ok := <-lines:
			if !ok || l == "done" {
				fmt.Println("bye")
				return
			}
		case <-deadline:
			fmt.Println("timed out")
			os.Exit(1)
		}
	}
}

// agent stands in for an agent harness with a credential: it reads its
// token at DST (its lease's copy in the private home), looks for the
// operator's source file SRC by every way it knows and for any other file
// holding the token, authenticates to the model service on its stream
// (descriptor 3) with the token, and rotates the token the way careful
// harnesses do (a new file renamed over the old), or with MODE "inplace"
// by rewriting the file itself, or with "wait" renames, then waits for
// its end (a minute). It prints digests of tokens, never a
// token. With MODE "link", "fifo" or "big" it leaves at DST, instead of a
// rotated token, a symbolic link to /etc/passwd, a FIFO, or a file of
// 1 MiB (more than any credential's bound in the tests).
func agent(src, dst, mode string) {
	tok, err := os.ReadFile(dst)
	if err != nil {
		fmt.Println("credential", err)
		os.Exit(1)
	}
	fmt.Printf("credential sha256 %x\n", sha256.Sum256(tok))
	for _, p := range []string{src, filepath.Dir(src), "/proc/1/root" + src, "/proc/self/root" + src,
		"/proc/self/cwd/" + src, "/workspace/.." + src, "/home/agent/.." + src, "/tmp/../.." + src} {
		if _, err := os.Lstat(p); err == nil {
			fmt.Println("source reached", p)
		} else {
			fmt.Println("source unreachable", p)
		}
	}
	// Any file but the lease's copy that holds the token is a way to
	// the source (or a copy of it the sandbox should not have).
	filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (p == "/proc" || p == "/sys" || p == "/dev") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() || p == dst {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, tok) {
			fmt.Println("token found at", p)
		}
		return nil
	})
	if os.Getenv("GLOVE_LOCAL_SERVICE_FDS_V1") != "" {
		reply, err := exchange(os.NewFile(3, "stream"), "Bearer "+string(tok))
		fmt.Println("model authenticated", err == nil && reply == "pong:Bearer "+string(tok))
	}
	if dir := os.Getenv("GLOVE_LOCAL_SERVICE_DIR"); dir != "" {
		// The pathname transport: the model service is the directory's
		// one alias, reached as any client would (net.Dial).
		ents, err := os.ReadDir(dir)
		ok := err == nil && len(ents) == 1
		if ok {
			c, err := net.Dial("unix", filepath.Join(dir, ents[0].Name()))
			ok = err == nil
			if ok {
				reply, err := exchange(c, "Bearer "+string(tok))
				ok = err == nil && reply == "pong:Bearer "+string(tok)
				c.Close()
			}
		}
		fmt.Println("model authenticated", ok)
	}
	if mode == "link" || mode == "fifo" || mode == "big" {
		if err := os.Remove(dst); err != nil {
			fmt.Println("spoil", err)
			os.Exit(1)
		}
		switch mode {
		case "link":
			err = os.Symlink("/etc/passwd", dst)
		case "fifo":
			err = syscall.Mkfifo(dst, 0o600)
		case "big":
			err = os.WriteFile(dst, bytes.Repeat([]byte("x"), 1<<20), 0o600)
		}
		fmt.Println("spoiled", err)
		return
	}
	next := append(tok, "+rotated"...)
	if mode == "inplace" {
		if err := os.WriteFile(dst, next, 0o600); err != nil {
			fmt.Println("rotate", err)
			os.Exit(1)
		}
		fmt.Printf("rotated to sha256 %x\n", sha256.Sum256(next))
		return
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, next, 0o600); err != nil {
		fmt.Println("rotate", err)
		os.Exit(1)
	}
	if err := os.Rename(tmp, dst); err != nil {
		fmt.Println("rotate", err)
		os.Exit(1)
	}
	fmt.Printf("rotated to sha256 %x\n", sha256.Sum256(next))
	if mode == "wait" {
		time.Sleep(60 * time.Second)
	}
}

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

// exchange sends msg as one frame on f and reads the reply.
func exchange(f io.ReadWriter, msg string) (string, error) {
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

// connectTo tries to reach the unix socket at path by its name, as a
// sandboxed program that finds an upstream's socket in one of its grants
// would: socket(2), connect(2), then one frame. It prints "ran" first, so
// that a test sees from outside whether it ran at all. When socket is
// denied, connect is still tried, on a socketpair end: connect's own
// denial is then told by EPERM, where a connect the kernel ran would fail
// with EISCONN.
func connectTo(path string) {
	fmt.Println("ran")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	fmt.Println("socket", err)
	if err != nil {
		pair, perr := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if perr != nil {
			fmt.Println("socketpair", perr)
			return
		}
		fd = pair[0]
	}
	err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
	fmt.Println("connect", err)
	if err != nil {
		return
	}
	reply, err := exchange(os.NewFile(uintptr(fd), "upstream"), "leak")
	fmt.Println("reply", reply, err)
}

// connects tries each path as connectTo does, printing one line per
// path: "connect PATH ERR", and "reply PATH ..." when it got through;
// then a datagram socket, sending to the first path.
func connects(paths []string) {
	fmt.Println("ran")
	for _, p := range paths {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			fmt.Println("socket", p, err)
			continue
		}
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: p})
		fmt.Println("connect", p, err)
		if err == nil {
			reply, err := exchange(os.NewFile(uintptr(fd), "leak"), "leak")
			fmt.Println("reply", p, reply, err)
		}
		syscall.Close(fd)
	}
	// A datagram socket needs no connect to reach a path: sendto the
	// first path with one.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	fmt.Println("dgram socket", err)
	if err == nil && len(paths) > 0 {
		err = syscall.Sendto(fd, []byte("leak"), 0, &syscall.SockaddrUnix{Name: paths[0]})
		fmt.Println("dgram sendto", err)
		syscall.Close(fd)
	}
}

// httpGet gets url with an HTTP client that follows redirects (as a
// harness's does) and prints each redirect and the outcome.
func httpGet(url string) {
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		fmt.Printf("http redirected to %s\n", req.URL)
		if len(via) > 3 {
			return fmt.Errorf("too many redirects")
		}
		return nil
	}}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Printf("http %s failed: %v\n", url, err)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	resp.Body.Close()
	fmt.Printf("http %s status %d body %q %v\n", url, resp.StatusCode, body, err)
}

// tcpExchanges connects to each address (an egress endpoint, or one that
// must not be reachable) and, where a connection is made, sends one
// framed "ping" and prints the framed reply.
func tcpExchanges(addrs []string) {
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 3*time.Second)
		if err != nil {
			fmt.Printf("tcp %s refused: %v\n", a, err)
			continue
		}
		if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			fmt.Printf("tcp %s deadline: %v\n", a, err)
		}
		msg := []byte("ping")
		_, err = c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...))
		var hdr [4]byte
		if err == nil {
			_, err = io.ReadFull(c, hdr[:])
		}
		var body []byte
		if err == nil && binary.BigEndian.Uint32(hdr[:]) <= 1<<16 {
			body = make([]byte, binary.BigEndian.Uint32(hdr[:]))
			_, err = io.ReadFull(c, body)
		}
		c.Close()
		fmt.Printf("tcp %s reply %s %v\n", a, body, err)
	}
}

// netprobe tries, in a session with egress endpoints, each way out that
// must stay shut, and prints the error of each: a UDP datagram to
// udpAddr (a listener of the host's, which must receive nothing), a DNS
// lookup, a raw socket, an IPv6, a unix and a netlink socket, a listener
// of its own on the sandbox's loopback, and any socket among its
// descriptors (the egress listeners and their hand-off are PID 1's and
// gloved's, never the program's).
func netprobe(udpAddr string) {
	try := func(name string, f func() error) { fmt.Printf("netprobe %s: %v\n", name, f()) }
	try("udp", func() error {
		c, err := net.Dial("udp", udpAddr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("leak"))
		return err
	})
	try("dns", func() error {
		_, err := net.LookupHost("example.com")
		return err
	})
	for _, s := range []struct {
		name             string
		domain, typ, pro int
	}{{"raw", syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_TCP}, {"inet6", syscall.AF_INET6, syscall.SOCK_STREAM, 0},
		{"unix", syscall.AF_UNIX, syscall.SOCK_STREAM, 0}, {"netlink", syscall.AF_NETLINK, syscall.SOCK_RAW, 0},
		{"packet", syscall.AF_PACKET, syscall.SOCK_RAW, 0}} {
		try(s.name, func() error {
			fd, err := syscall.Socket(s.domain, s.typ, s.pro)
			if err == nil {
				syscall.Close(fd)
			}
			return err
		})
	}
	try("bind", func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: 9999, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		return syscall.Listen(fd, 1)
	})
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Println("netprobe fds:", err)
		return
	}
	var socks []string
	for _, e := range entries {
		if t, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(t, "socket:") {
			socks = append(socks, e.Name())
		}
	}
	fmt.Printf("netprobe sockets held: %v\n", socks)
}

// etcReport prints what the sandbox has of /etc: its entries, a SHA-256
// of the CA bundle, how many of the CA directory's links resolve, the
// user its uid resolves to (os/user reads /etc/passwd in a static
// build), and for each of a few host files whether it is there.
func etcReport() {
	ents, err := os.ReadDir("/etc")
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	fmt.Println("etc entries", names, err)
	if b, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		fmt.Printf("ca bundle sha256 %x\n", sha256.Sum256(b))
	} else {
		fmt.Println("ca bundle", err)
	}
	links, resolved := 0, 0
	certs, _ := os.ReadDir("/etc/ssl/certs")
	for _, e := range certs {
		if e.Type()&fs.ModeSymlink != 0 {
			links++
			if _, err := os.ReadFile(filepath.Join("/etc/ssl/certs", e.Name())); err == nil {
				resolved++
			}
		}
	}
	fmt.Println("ca links", links, "resolved", resolved)
	if u, err := user.LookupId(strconv.Itoa(os.Getuid())); err == nil {
		fmt.Println("user", u.Username, u.HomeDir)
	} else {
		fmt.Println("user", err)
	}
	for _, p := range []string{"/etc/shadow", "/etc/gshadow", "/etc/hostname", "/etc/machine-id", "/etc/os-release", "/etc/resolv.conf", "/etc/ssl/private", "/etc/ssl/openssl.cnf", "/etc/bash.bashrc"} {
		if _, err := os.Lstat(p); err == nil {
			fmt.Println("host file present", p)
		} else {
			fmt.Println("host file absent", p)
		}
	}
	err = os.WriteFile("/etc/passwd", []byte("root::0:0::/:/bin/sh\n"), 0o644)
	fmt.Println("write /etc/passwd", err != nil)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "etc" {
		etcReport()
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "netprobe" {
		netprobe(os.Args[2])
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "tcp" {
		tcpExchanges(os.Args[2:])
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "http" {
		httpGet(os.Args[2])
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "connects" {
		connects(os.Args[2:])
		return
	}
	if len(os.Args) > 2 && os.Args[1] == "connect" {
		connectTo(os.Args[2])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "stream" {
		stream()
		return
	}
	if len(os.Args) > 3 && os.Args[1] == "envsum" {
		// A harness with an API key in its environment: it says what
		// it got by digest only, then stays a while so that the test
		// can look at the host meanwhile.
		v, ok := os.LookupEnv(os.Args[2])
		fmt.Printf("env %s set %v sha256 %x\n", os.Args[2], ok, sha256.Sum256([]byte(v)))
		secs, _ := time.ParseDuration(os.Args[3] + "s")
		time.Sleep(secs)
		return
	}
	if len(os.Args) > 3 && os.Args[1] == "agent" {
		mode := ""
		if len(os.Args) > 4 {
			mode = os.Args[4]
		}
		agent(os.Args[2], os.Args[3], mode)
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "terminal" {
		terminal()
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
		if dir := os.Getenv("GLOVE_LOCAL_SERVICE_DIR"); dir != "" {
			// Each alias: its mode, then two connections, one after
			// the other, each with one exchange (the second checks the
			// first's end freed its relay).
			ents, err := os.ReadDir(dir)
			fmt.Println("dir", len(ents), err)
			for _, ent := range ents {
				p := filepath.Join(dir, ent.Name())
				st, err := os.Lstat(p)
				if err == nil {
					fmt.Println("alias", ent.Name(), st.Mode())
				}
				for i := 0; i < 2; i++ {
					c, err := net.Dial("unix", p)
					if err != nil {
						fmt.Println("dial", ent.Name(), err)
						continue
					}
					reply, err := exchange(c, "ping "+ent.Name())
					fmt.Println("reply", ent.Name(), reply, err)
					c.Close()
				}
			}
			dst, err := os.Stat(dir)
			if err == nil {
				fmt.Println("dir mode", dst.Mode())
			}
			fmt.Println("dir write", os.WriteFile(filepath.Join(dir, "x"), nil, 0o600) != nil)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "streamwait" {
		streamWait()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "ids" {
		// Its user namespace as it sees it: the uid map (one line) and
		// the namespace's identity.
		m, err := os.ReadFile("/proc/self/uid_map")
		ns, nerr := os.Readlink("/proc/self/ns/user")
		fmt.Printf("uid_map %s err=%v\nuserns %s err=%v\n", strings.Join(strings.Fields(string(m)), " "), err, ns, nerr)
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
// on a unix socket and answers each frame with "pong:" and the payload.
// On its standard output it tells what it got, for a test to judge from
// outside who reached it: "accept pid=N" for each connection (the
// connecting process, by SO_PEERCRED), in the order they were accepted,
// and "bytes N" for each read of N bytes from any of them. Given a second
// argument, it also appends a line "accept" to that file for each
// connection it accepts.
const Upstream = `package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// counted tells each read's size on standard output.
type counted struct{ net.Conn }

func (c counted) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		fmt.Println("bytes", n)
	}
	return n, err
}

// peerPID is the pid of the process that connected c, or -1.
func peerPID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1
	}
	pid := -1
	raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

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
		fmt.Println("accept pid=" + fmt.Sprint(peerPID(c)))
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
			r := counted{c}
			for {
				var hdr [4]byte
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
				if _, err := io.ReadFull(r, body); err != nil {
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
