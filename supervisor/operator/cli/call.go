// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"time"
)

// DefaultSocket is glove call's default control socket.
const DefaultSocket = "/run/glove/gloved.sock"

const usageCall = "usage: glove call [--socket PATH] METHOD [PARAMS-JSON]"

// maxReply bounds one line from gloved.
const maxReply = 16 << 20

// callFlags are glove call's flags, and glove attach's.
type callFlags struct{ socket string }

func (o *callFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.socket, "socket", DefaultSocket, "gloved's control socket")
}

// callCommand sends one request to gloved (docs/protocol.md) and prints
// the result; for attach, it writes the session's output until it ends
// and exits with the session's status, as glove run does.
func callCommand(args []string, stdout, stderr io.Writer) int {
	var o callFlags
	fs := newFlags("call")
	o.define(fs)
	socket := &o.socket
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usageCall) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "glove: call: %v\n%s\n", err, usageCall)
		return ExitUsage
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fmt.Fprintf(stderr, "glove: call: want METHOD and optional PARAMS-JSON\n%s\n", usageCall)
		return ExitUsage
	}
	method := fs.Arg(0)
	req := map[string]any{"jsonrpc": "2.0", "id": 1, "method": method}
	if fs.NArg() == 2 {
		params := json.RawMessage(fs.Arg(1))
		if !json.Valid(params) || bytes.TrimSpace(params)[0] != '{' {
			fmt.Fprintf(stderr, "glove: call: PARAMS-JSON must be a JSON object\n%s\n", usageCall)
			return ExitUsage
		}
		req["params"] = params
	}
	line, err := json.Marshal(req)
	if err != nil {
		fmt.Fprintf(stderr, "glove: call: %v\n", err)
		return ExitUsage
	}
	c, err := net.DialTimeout("unix", *socket, 5*time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "glove: call: %v\n", err)
		return ExitFail
	}
	defer c.Close()
	if _, err := c.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(stderr, "glove: call: %v\n", err)
		return ExitFail
	}
	r := bufio.NewReaderSize(c, 64<<10)
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := readLine(r, &resp); err != nil {
		fmt.Fprintf(stderr, "glove: call: %v\n", err)
		return ExitFail
	}
	if resp.Error != nil {
		fmt.Fprintf(stderr, "glove: call: %s: error %s\n", method, resp.Error)
		return ExitFail
	}
	if method != "attach" {
		var out bytes.Buffer
		if err := json.Indent(&out, resp.Result, "", "  "); err != nil {
			out.Write(resp.Result)
		}
		fmt.Fprintln(stdout, out.String())
		return ExitOK
	}
	for {
		resp.Method, resp.Params = "", nil
		if err := readLine(r, &resp); err != nil {
			fmt.Fprintf(stderr, "glove: call: attach: %v\n", err)
			return ExitFail
		}
		switch resp.Method {
		case "output":
			var o struct {
				Data []byte `json:"data"`
			}
			if err := json.Unmarshal(resp.Params, &o); err != nil {
				fmt.Fprintf(stderr, "glove: call: attach: output: %v\n", err)
				return ExitFail
			}
			// As glove attach: output nobody can read ends the call; the
			// session keeps running.
			if _, err := stdout.Write(o.Data); err != nil {
				fmt.Fprintf(stderr, "glove: call: attach: write output: %v\n", err)
				return ExitFail
			}
		case "ended":
			var e struct {
				Termination string `json:"termination"`
				Status      int    `json:"status"`
			}
			if err := json.Unmarshal(resp.Params, &e); err != nil {
				fmt.Fprintf(stderr, "glove: call: attach: ended: %v\n", err)
				return ExitFail
			}
			if e.Termination != "exited" {
				fmt.Fprintf(stderr, "glove: call: session ended: %s\n", e.Termination)
			}
			return e.Status
		}
	}
}

// readLine reads one newline-terminated JSON object into v.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > maxReply {
			return fmt.Errorf("reply longer than %d bytes", maxReply)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(line) == 0 {
			return fmt.Errorf("gloved closed the connection")
		}
		if err != nil && err != io.EOF {
			return err
		}
		break
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("bad reply: %w", err)
	}
	return nil
}
