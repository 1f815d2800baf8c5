// Command glove-modelserver runs the scripted model server on an address,
// for trying a harness against it by hand. Every request is written to
// stderr as one JSON line.
//
//	glove-modelserver -addr 127.0.0.1:18080 -key sk-test \
//	  -command 'cat input.txt > out.txt' -text 'All done.'
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/glove-sandbox/glove/testenv/modelserver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "TCP address to listen on")
	key := flag.String("key", "", "the one API key accepted")
	command := flag.String("command", "", "shell command of the first turn's tool call")
	text := flag.String("text", "done", "final answer of the second turn")
	flag.Parse()
	if err := run(*addr, *key, *command, *text); err != nil {
		fmt.Fprintln(os.Stderr, "glove-modelserver:", err)
		os.Exit(1)
	}
}

func run(addr, key, command, text string) error {
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
	hs := srv.Serve(l)
	fmt.Println(l.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if err := hs.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}
