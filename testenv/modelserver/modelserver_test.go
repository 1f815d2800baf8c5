// SPDX-License-Identifier: Apache-2.0

package modelserver

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

var script = []Turn{{Command: "cat input.txt"}, {Text: "the end"}}

func newTest(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s := New(Config{Key: "k1", Responses: script, Messages: script})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func post(t *testing.T, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// events parses a server-sent event stream into its data objects.
func events(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

func TestWrongKeyRefused(t *testing.T) {
	s, ts := newTest(t)
	for _, hdr := range []map[string]string{
		{"Authorization": "Bearer k2"},
		{"X-Api-Key": "k2"},
		{},
	} {
		code, _ := post(t, ts.URL+"/v1/responses", hdr, `{"stream":true}`)
		if code != http.StatusUnauthorized {
			t.Errorf("%v: status %d, want 401", hdr, code)
		}
	}
	for _, r := range s.Log() {
		if r.KeyOK || r.Turn != -1 {
			t.Errorf("refused request logged as %+v", r)
		}
	}
}

func TestKeyElsewhere(t *testing.T) {
	s, ts := newTest(t)
	post(t, ts.URL+"/v1/responses", map[string]string{"Authorization": "Bearer k1"},
		`{"stream":true,"input":[{"type":"message","content":"k1"}]}`)
	if r := s.Log()[0]; !r.KeyOK || !r.KeyElsewhere {
		t.Errorf("key in the body not noticed: %+v", r)
	}
}

func TestResponsesScript(t *testing.T) {
	s, ts := newTest(t)
	auth := map[string]string{"Authorization": "Bearer k1"}
	code, body := post(t, ts.URL+"/v1/responses", auth,
		`{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":[]}`)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	evs := events(t, body)
	if len(evs) != 4 || evs[len(evs)-1]["type"] != "response.completed" {
		t.Fatalf("events %v", evs)
	}
	item := evs[2]["item"].(map[string]any)
	if item["name"] != CodexShellTool || item["arguments"] != `{"cmd":"cat input.txt"}` {
		t.Errorf("tool call item %v", item)
	}

	_, body = post(t, ts.URL+"/v1/responses", auth,
		`{"model":"m","stream":true,"tools":[{"name":"exec_command"}],"input":[{"type":"function_call_output","call_id":"call_1","output":"hello"}]}`)
	evs = events(t, body)
	if len(evs) != 5 || evs[2]["delta"] != "the end" {
		t.Fatalf("events %v", evs)
	}
	log := s.Log()
	if len(log) != 2 || log[0].Turn != 0 || !log[0].ShellTool || log[1].Turn != 1 ||
		len(log[1].ToolResults) != 1 || log[1].ToolResults[0] != "hello" {
		t.Errorf("log %+v", log)
	}

	// A third turn is not in the script: refused, and logged so.
	code, _ = post(t, ts.URL+"/v1/responses", auth,
		`{"stream":true,"tools":[{"name":"exec_command"}],"input":[{"type":"function_call_output","output":"a"},{"type":"function_call_output","output":[{"type":"input_text","text":"b"}]}]}`)
	if code != http.StatusBadRequest {
		t.Errorf("past the script: status %d", code)
	}
	if r := s.Log()[2]; r.Err == "" || strings.Join(r.ToolResults, ",") != "a,b" {
		t.Errorf("past the script logged as %+v", r)
	}
}

func TestMessagesScript(t *testing.T) {
	s, ts := newTest(t)
	key := map[string]string{"X-Api-Key": "k1"}
	tools := `"tools":[{"name":"Read"},{"name":"Bash"}]`
	_, body := post(t, ts.URL+"/v1/messages", key,
		`{"model":"m","stream":true,`+tools+`,"messages":[{"role":"user","content":"go"}]}`)
	evs := events(t, body)
	var types []string
	for _, e := range evs {
		types = append(types, e["type"].(string))
	}
	want := "message_start content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(types, " ") != want {
		t.Fatalf("event types %v", types)
	}
	if d := evs[2]["delta"].(map[string]any); d["partial_json"] != `{"command":"cat input.txt","description":"Run the scripted command"}` {
		t.Errorf("tool input delta %v", d)
	}
	if d := evs[4]["delta"].(map[string]any); d["stop_reason"] != "tool_use" {
		t.Errorf("message_delta %v", d)
	}

	_, body = post(t, ts.URL+"/v1/messages", key,
		`{"model":"m","stream":true,`+tools+`,"messages":[{"role":"user","content":"go"},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"hi"}]}]}]}`)
	if evs = events(t, body); evs[2]["delta"].(map[string]any)["text"] != "the end" {
		t.Errorf("final turn events %v", evs)
	}

	// No tools: a side call, answered with fixed text, outside the script.
	code, body := post(t, ts.URL+"/v1/messages", key, `{"model":"small","messages":[{"role":"user","content":"title?"}]}`)
	if code != http.StatusOK || !strings.Contains(body, `"text":"ok"`) {
		t.Errorf("side call: %d %s", code, body)
	}
	log := s.Log()
	if len(log) != 3 || log[1].Turn != 1 || log[1].ToolResults[0] != "hi" || log[2].Kind != "messages-side" || log[2].Turn != -1 {
		t.Errorf("log %+v", log)
	}
}

func TestUnknownPath(t *testing.T) {
	s, ts := newTest(t)
	if code, _ := post(t, ts.URL+"/api/hello", map[string]string{"X-Api-Key": "k1"}, ""); code != http.StatusNotFound {
		t.Errorf("status %d", code)
	}
	if r := s.Log()[0]; r.Kind != "other" || r.Path != "/api/hello" {
		t.Errorf("logged as %+v", r)
	}
}

func TestProxied(t *testing.T) {
	s, ts := newTest(t)
	req, err := http.NewRequest(http.MethodPost, "http://model.glove.invalid/v1/responses", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k1")
	c := &http.Client{Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(ts.URL) }}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := s.Log()[0]; !r.Proxied || r.Host != "model.glove.invalid" || !strings.HasPrefix(r.Kind, "responses") {
		t.Errorf("logged as %+v", r)
	}
}

// codex's TUI titles a thread with a request that offers no tools; it
// must not receive the scripted tool call.
func TestResponsesSideCall(t *testing.T) {
	s, ts := newTest(t)
	code, body := post(t, ts.URL+"/v1/responses", map[string]string{"Authorization": "Bearer k1"},
		`{"model":"m","stream":true,"tools":[],"input":[{"type":"message","role":"user","content":[]}]}`)
	if code != http.StatusOK || !strings.Contains(body, `"delta":"ok"`) {
		t.Fatalf("side call: %d %s", code, body)
	}
	if r := s.Log()[0]; r.Kind != "responses-side" || r.Turn != -1 {
		t.Errorf("logged as %+v", r)
	}
}
