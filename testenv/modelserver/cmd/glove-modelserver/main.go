// SPDX-License-Identifier: Apache-2.0

// Command glove-modelserver runs the scripted model server on an address,
// for trying a harness against it by hand. Every request is written to
// stderr as one JSON line.
//
//	glove-modelserver -addr 127.0.0.1:18080 -key sk-test \
//	  -command 'cat input.txt > out.txt' -text 'All done.'
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/testenv/modelserver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "TCP address to listen on")
	key := flag.String("key", "", "the one API key accepted")
	command := flag.String("command", "", "shell command of the first turn's tool call")
	text := flag.String("text", "done", "final answer of the second turn")
	dump := flag.String("dump", "", "directory to write each request into (headers but the key's, then the body)")
	flag.Parse()
	if err := run(*addr, *key, *command, *text, *dump); err != nil {
		fmt.Fprintln(os.Stderr, "glove-modelserver:", err)
		os.Exit(1)
	}
}

func run(addr, key, command, text, dump string) error {
	if key == "" {
		return fmt.Errorf("-key is required: the server refuses every request without one")
	}
	script := []modelserver.Turn{{Text: text}}
	if command != "" {
		script = append([]modelserver.Turn{{Command: command}}, script...)
	}
	enc := json.NewEncoder(os.Stderr)
	srv := modelserver.New(modelserver.Config{
		Key: key, Responses: script, Messages: script,
		OnRequest: func(r modelserver.Request) { _ = enc.Encode(r) },
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var h http.Handler = srv
	if dump != "" {
		h = dumper(dump, srv)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	fmt.Println(l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if err := hs.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// dumper writes each request to dir/NNN-METHOD.txt before next sees it,
// for reading what a harness really sends. Authorization and x-api-key
// values are left out.
func dumper(dir string, next http.Handler) http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s\n", r.Method, r.RequestURI)
		for k, vs := range r.Header {
			if k == "Authorization" || k == "X-Api-Key" {
				vs = []string{"(left out)"}
			}
			fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ", "))
		}
		b.WriteString("\n")
		b.Write(body)
		name := filepath.Join(dir, fmt.Sprintf("%03d-%s.txt", n.Add(1), r.Method))
		if err := os.WriteFile(name, []byte(b.String()), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "glove-modelserver: dump:", err)
		}
		next.ServeHTTP(w, r)
	})
}
