// SPDX-License-Identifier: Apache-2.0

package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// ClaudeShellTool is claude-code's shell tool: "Bash" with input
// {"command": "<shell command>", "description": "<what it does>"}.
const ClaudeShellTool = "Bash"

// messagesRequest is the part of a Messages API request the server reads.
type messagesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// block is a content block of a message; only tool_result blocks are read.
type block struct {
	Type    string          `json:"type"`
	Content json.RawMessage `json:"content"`
}

// toolResults returns the text of every tool_result block in the
// conversation, oldest first. A message's content is a string (no blocks)
// or a list of blocks; a tool_result's content is a string or a list of
// text blocks.
func (r *messagesRequest) toolResults() []string {
	var out []string
	for _, m := range r.Messages {
		var blocks []block
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				out = append(out, outputText(b.Content))
			}
		}
	}
	return out
}

func (s *Server) messages(w http.ResponseWriter, body []byte, rec *Request) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Status, rec.Err = http.StatusBadRequest, fmt.Sprintf("decode request: %v", err)
		writeJSONError(w, rec.Status, rec.Kind, rec.Err)
		return
	}
	rec.Model, rec.Stream, rec.Tools = req.Model, req.Stream, len(req.Tools)
	for _, t := range req.Tools {
		if t.Name == ClaudeShellTool {
			rec.ShellTool = true
		}
	}
	rec.ToolResults = req.toolResults()

	var turn Turn
	if !rec.ShellTool {
		// A request that cannot receive a tool call is not the agent's
		// loop: claude-code asks a small model for titles and checks.
		// It gets a fixed short text and stays out of the script.
		rec.Kind = "messages-side"
		turn = Turn{Text: s.cfg.SideText}
		if turn.Text == "" {
			turn.Text = "ok"
		}
	} else {
		var err error
		if turn, err = pick(s.cfg.Messages, len(rec.ToolResults)); err != nil {
			rec.Status, rec.Err = http.StatusBadRequest, err.Error()
			writeJSONError(w, rec.Status, rec.Kind, rec.Err)
			return
		}
		rec.Turn = len(rec.ToolResults)
	}
	rec.Answer = summarise(turn)

	n := rec.Turn + 1
	if rec.Turn < 0 {
		n = 1000 + len(s.Log())
	}
	content, stop, err := messageContent(n, turn)
	if err != nil {
		rec.Status, rec.Err = http.StatusInternalServerError, err.Error()
		http.Error(w, rec.Err, rec.Status)
		return
	}
	msg := map[string]any{
		"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant",
		"model": req.Model, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 100, "output_tokens": 10},
	}
	if !req.Stream {
		msg["content"], msg["stop_reason"] = content, stop
		rec.Status = http.StatusOK
		writeJSON(w, msg)
		return
	}
	e, err := startSSE(w)
	if err != nil {
		rec.Status, rec.Err = http.StatusInternalServerError, err.Error()
		return
	}
	rec.Status = http.StatusOK
	if err := streamMessage(e, msg, content, stop); err != nil {
		rec.Err = err.Error()
	}
}

// messageContent returns the content blocks of one turn and its stop
// reason.
func messageContent(n int, t Turn) ([]map[string]any, string, error) {
	if t.Command == "" {
		return []map[string]any{{"type": "text", "text": t.Text}}, "end_turn", nil
	}
	return []map[string]any{{
		"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", n), "name": ClaudeShellTool,
		"input": map[string]string{"command": t.Command, "description": "Run the scripted command"},
	}}, "tool_use", nil
}

// streamMessage sends a message as the Messages API's event stream:
// message_start (empty content), per block a content_block_start with the
// block emptied, one delta carrying its text or its input as JSON, and a
// content_block_stop, then message_delta with the stop reason and
// message_stop.
func streamMessage(e *sse, msg map[string]any, content []map[string]any, stop string) error {
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	evs := []event{{"message_start", map[string]any{"type": "message_start", "message": start}}}
	for i, b := range content {
		var empty, delta map[string]any
		switch b["type"] {
		case "text":
			empty = map[string]any{"type": "text", "text": ""}
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		case "tool_use":
			input, err := json.Marshal(b["input"])
			if err != nil {
				return fmt.Errorf("encode tool input: %w", err)
			}
			empty = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(input)}
		default:
			return fmt.Errorf("block type %v is not scripted", b["type"])
		}
		evs = append(evs,
			event{"content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": empty}},
			event{"content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta}},
			event{"content_block_stop", map[string]any{"type": "content_block_stop", "index": i}},
		)
	}
	evs = append(evs,
		event{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": 10}}},
		event{"message_stop", map[string]any{"type": "message_stop"}},
	)
	return e.send(evs)
}
