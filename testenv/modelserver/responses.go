// SPDX-License-Identifier: Apache-2.0

package modelserver

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// CodexShellTool is the shell tool codex 0.171.0 offers the model:
// "exec_command" with arguments {"cmd": "<shell command>"}, run in a pty
// by the user's shell (read off its first request's tools).
const CodexShellTool = "exec_command"

// responsesRequest is the part of a Responses API request the server
// reads.
type responsesRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Input []struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
	} `json:"input"`
}

// outputText reads a function_call_output's output: a string, or a list
// of content items of which the text ones are joined.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &items) == nil {
		out := ""
		for _, it := range items {
			out += it.Text
		}
		return out
	}
	return string(raw)
}

func (s *Server) responses(w http.ResponseWriter, body []byte, rec *Request) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		rec.Status, rec.Err = http.StatusBadRequest, fmt.Sprintf("decode request: %v", err)
		writeJSONError(w, rec.Status, rec.Kind, rec.Err)
		return
	}
	rec.Model, rec.Stream, rec.Tools = req.Model, req.Stream, len(req.Tools)
	for _, t := range req.Tools {
		if t.Name == CodexShellTool {
			rec.ShellTool = true
		}
	}
	for _, it := range req.Input {
		if it.Type == "function_call_output" {
			rec.ToolResults = append(rec.ToolResults, outputText(it.Output))
		}
	}
	var turn Turn
	var err error
	if !rec.ShellTool {
		// A request that offers no shell tool is not the agent's loop:
		// codex's TUI titles each new thread with a tool-less request of
		// its own. It gets a fixed text and stays out of the script.
		rec.Kind = "responses-side"
		turn = Turn{Text: s.cfg.SideText}
		if turn.Text == "" {
			turn.Text = "ok"
		}
	} else {
		turn, err = pick(s.cfg.Responses, len(rec.ToolResults))
	}
	if err == nil && !req.Stream {
		err = fmt.Errorf("non-streaming Responses request is not scripted")
	}
	if err != nil {
		rec.Status, rec.Err = http.StatusBadRequest, err.Error()
		writeJSONError(w, rec.Status, rec.Kind, rec.Err)
		return
	}
	n := len(rec.ToolResults)
	if rec.ShellTool {
		rec.Turn = n
	} else {
		n = 1000 + len(s.Log())
	}
	rec.Answer = summarise(turn)
	e, err := startSSE(w)
	if err != nil {
		rec.Status, rec.Err = http.StatusInternalServerError, err.Error()
		return
	}
	rec.Status = http.StatusOK
	if err := streamResponse(e, n, turn); err != nil {
		rec.Err = err.Error()
	}
}

// streamResponse sends one turn as the Responses API's event stream:
// response.created, the output item (added, text deltas, done) and
// response.completed with usage. codex acts on output_item.done and ends
// the turn at response.completed.
func streamResponse(e *sse, n int, t Turn) error {
	id := fmt.Sprintf("resp_%d", n+1)
	var item, added map[string]any
	if t.Command != "" {
		args, err := json.Marshal(map[string]string{"cmd": t.Command})
		if err != nil {
			return fmt.Errorf("encode arguments: %w", err)
		}
		item = map[string]any{
			"type": "function_call", "id": fmt.Sprintf("fc_%d", n+1),
			"call_id": fmt.Sprintf("call_%d", n+1), "name": CodexShellTool,
			"arguments": string(args), "status": "completed",
		}
		added = item
	} else {
		msgID := fmt.Sprintf("msg_%d", n+1)
		item = map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": t.Text, "annotations": []any{}}},
		}
		added = map[string]any{
			"type": "message", "id": msgID, "role": "assistant", "status": "in_progress",
			"content": []any{},
		}
	}
	events := []event{
		{"response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "status": "in_progress"}}},
		{"response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": added}},
	}
	if t.Command == "" {
		events = append(events, event{"response.output_text.delta", map[string]any{
			"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
			"content_index": 0, "delta": t.Text,
		}})
	}
	events = append(events,
		event{"response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item}},
		event{"response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
			"id": id, "status": "completed",
			"usage": map[string]any{
				"input_tokens": 100, "input_tokens_details": map[string]int{"cached_tokens": 0},
				"output_tokens": 10, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
				"total_tokens": 110,
			},
		}}},
	)
	return e.send(events)
}
