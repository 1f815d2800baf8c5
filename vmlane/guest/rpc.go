// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// RPCError is a JSON-RPC error response (docs/protocol.md, "Error codes").
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("rpc error %d: %s", e.Code, e.Message) }

// Error codes of gloved.
const (
	CodeNotFound     = -32001
	CodeConflict     = -32002
	CodeUnauthorized = -32003
	CodeUnavailable  = -32004
	CodeRejected     = -32005
)

// Message is one line from gloved: a response (ID set) or a notification
// (Method set).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// request is one line to gloved.
type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// maxLine bounds a line read from gloved (an attach replays at most 64 KiB
// of transcript per notification, base64-encoded).
const maxLine = 1 << 20

// Client is a JSON-RPC 2.0 client for gloved's control socket: one JSON
// object per line. Requests are answered in order; notifications that
// arrive while a call waits for its response are queued for Next.
type Client struct {
	conn    net.Conn
	r       *bufio.Reader
	mu      sync.Mutex
	nextID  uint64
	pending []Message
	// Trace, when set, receives every line sent and received.
	Trace func(dir, line string)
}

// NewClient speaks JSON-RPC over conn.
func NewClient(conn net.Conn) *Client {
	return &Client{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// EncodeRequest is the request line for id, method and params (nil:
// no params member).
func EncodeRequest(id uint64, method string, params any) ([]byte, error) {
	b, err := json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// readLine reads one non-empty line (without "\n" or "\r\n").
func readLine(r *bufio.Reader) ([]byte, error) {
	for {
		var line []byte
		for {
			chunk, isPrefix, err := r.ReadLine()
			if err != nil {
				if err == io.EOF && len(line) > 0 {
					return nil, io.ErrUnexpectedEOF
				}
				return nil, err
			}
			line = append(line, chunk...)
			if len(line) > maxLine {
				return nil, fmt.Errorf("a line from gloved longer than %d bytes", maxLine)
			}
			if !isPrefix {
				break
			}
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) > 0 {
			return line, nil
		}
	}
}

// DecodeMessage decodes one line from gloved.
func DecodeMessage(line []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("not a JSON-RPC message: %w: %.200q", err, line)
	}
	if m.JSONRPC != "2.0" {
		return m, fmt.Errorf("jsonrpc %q, want \"2.0\": %.200q", m.JSONRPC, line)
	}
	if m.Method == "" && len(m.ID) == 0 {
		return m, fmt.Errorf("neither a response nor a notification: %.200q", line)
	}
	return m, nil
}

func (c *Client) read(deadline time.Time) (Message, error) {
	_ = c.conn.SetReadDeadline(deadline)
	line, err := readLine(c.r)
	if err != nil {
		return Message{}, err
	}
	if c.Trace != nil {
		c.Trace("<-", string(line))
	}
	return DecodeMessage(line)
}

// Call sends one request and waits (until timeout) for its response,
// decoding the result into result (if not nil). An error response is
// returned as *RPCError.
func (c *Client) Call(method string, params any, result any, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := c.nextID
	line, err := EncodeRequest(id, method, params)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	_ = c.conn.SetWriteDeadline(deadline)
	if c.Trace != nil {
		c.Trace("->", string(bytes.TrimSuffix(line, []byte("\n"))))
	}
	if _, err := c.conn.Write(line); err != nil {
		return fmt.Errorf("%s: send: %w", method, err)
	}
	want := fmt.Sprint(id)
	for {
		m, err := c.read(deadline)
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if m.Method != "" && len(m.ID) == 0 {
			c.pending = append(c.pending, m)
			continue
		}
		if string(m.ID) != want {
			return fmt.Errorf("%s: response id %s, want %s", method, m.ID, want)
		}
		if m.Error != nil {
			return m.Error
		}
		if result != nil {
			if err := json.Unmarshal(m.Result, result); err != nil {
				return fmt.Errorf("%s: decode result: %w: %.300s", method, err, m.Result)
			}
		}
		return nil
	}
}

// Next returns the next notification (queued first), waiting until
// deadline.
func (c *Client) Next(deadline time.Time) (Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		m := c.pending[0]
		c.pending = c.pending[1:]
		return m, nil
	}
	m, err := c.read(deadline)
	if err != nil {
		return m, err
	}
	if m.Method == "" {
		return m, fmt.Errorf("an unexpected response %s while waiting for a notification", m.ID)
	}
	return m, nil
}

// IsCode reports whether err is an RPC error with that code.
func IsCode(err error, code int) bool {
	var e *RPCError
	return errors.As(err, &e) && e.Code == code
}
