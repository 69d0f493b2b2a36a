package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// streamEvents posts a streamed Responses request and returns its server-sent events' data, decoded, and the
// raw stream.
func streamEvents(t *testing.T, url, body string) (events []map[string]any, raw []byte) {
	t.Helper()
	_, raw = postJSON(t, url, body)
	for _, ev := range strings.Split(string(raw), "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		events = append(events, e)
	}
	return events, raw
}

func decodeResp(t *testing.T, b []byte) (id, model, text string, calls [][3]string, inTok int) {
	t.Helper()
	var r struct {
		ID     string           `json:"id"`
		Object string           `json:"object"`
		Model  string           `json:"model"`
		Output []map[string]any `json:"output"`
		Usage  struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Object != "response" {
		t.Fatalf("not a response: %s", b)
	}
	for _, o := range r.Output {
		switch o["type"] {
		case "message":
			for _, c := range o["content"].([]any) {
				text += c.(map[string]any)["text"].(string)
			}
		case "function_call":
			calls = append(calls, [3]string{o["call_id"].(string), o["name"].(string), o["arguments"].(string)})
		}
	}
	return r.ID, r.Model, text, calls, r.Usage.InputTokens
}

// TestGatewayResponses: /v1/responses through the real llama-server: text, a tool round trip with
// function_call_output, an image, previous_response_id and item_reference, and the streamed events.
func TestGatewayResponses(t *testing.T) {
	f := sharedFixture(t)
	u := f.url + "/v1/responses"
	tools := `[{"type":"function","name":"list_dir","description":"List a folder","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`

	st, b := postJSON(t, u, `{"model":"gpt-4o-mini","input":"hello"}`)
	id, model, text, _, plainTok := decodeResp(t, b)
	if st != 200 || text != "Hi!" || model != "gpt-4o-mini" || !strings.HasPrefix(id, "resp_") {
		t.Fatalf("text: %d %s", st, b)
	}
	st, b = postJSON(t, u, `{"model":"tiny","input":[{"role":"user","content":"what is here?"}],"tools":`+tools+`}`)
	id1, _, _, calls, _ := decodeResp(t, b)
	if st != 200 || len(calls) != 1 || calls[0][1] != "list_dir" || calls[0][2] != `{"path":"."}` {
		t.Fatalf("tool call: %d %s", st, b)
	}
	st, b = postJSON(t, u, `{"model":"tiny","tools":`+tools+`,"input":[{"role":"user","content":"what is here?"},`+
		`{"type":"function_call","call_id":"`+calls[0][0]+`","name":"list_dir","arguments":"{\"path\":\".\"}"},`+
		`{"type":"function_call_output","call_id":"`+calls[0][0]+`","output":"[\"a.txt\"]"}]}`)
	if _, _, text, calls2, _ := decodeResp(t, b); st != 200 || text != "Hi!" || len(calls2) != 0 {
		t.Fatalf("after the result: %d %s", st, b)
	}
	// The same through previous_response_id.
	st, b = postJSON(t, u, `{"model":"tiny","tools":`+tools+`,"previous_response_id":"`+id1+`","input":[`+
		`{"type":"function_call_output","call_id":"`+calls[0][0]+`","output":"[\"a.txt\"]"}]}`)
	if _, _, text, _, _ := decodeResp(t, b); st != 200 || text != "Hi!" {
		t.Fatalf("previous_response_id: %d %s", st, b)
	}
	if st, b := postJSON(t, u, `{"model":"tiny","previous_response_id":"resp_nope","input":"hi"}`); st != 400 || !strings.Contains(string(b), "not known here") {
		t.Fatalf("unknown previous_response_id: %d %s", st, b)
	}
	png := base64.StdEncoding.EncodeToString(pngBytes(t))
	st, b = postJSON(t, u, `{"model":"tiny","input":[{"role":"user","content":[{"type":"input_text","text":"hello"},{"type":"input_image","image_url":"data:image/png;base64,`+png+`"}]}]}`)
	if _, _, text, _, tok := decodeResp(t, b); st != 200 || text != "Hi!" || tok != plainTok+16 {
		t.Fatalf("image: %d %s (prompt tokens without the image %d)", st, b, plainTok)
	}
	if st, b := postJSON(t, u, `{"model":"tiny","input":[{"role":"user","content":[{"type":"input_image","image_url":"http://127.0.0.1:9/x.png"}]}]}`); st != 400 || !strings.Contains(string(b), "not a data URL") {
		t.Fatalf("URL image: %d %s", st, b)
	}

	events, raw := streamEvents(t, u, `{"model":"tiny","stream":true,"input":"what is here?","tools":`+tools+`}`)
	var types []string
	var args string
	var final map[string]any
	for _, e := range events {
		typ := e["type"].(string)
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
		if typ == "response.function_call_arguments.delta" {
			args += e["delta"].(string)
		}
		if typ == "response.completed" {
			final = e["response"].(map[string]any)
		}
	}
	want := "response.created,response.in_progress,response.output_item.added,response.function_call_arguments.delta," +
		"response.function_call_arguments.done,response.output_item.done,response.completed"
	if strings.Join(types, ",") != want || args != `{"path":"."}` || final["status"] != "completed" {
		t.Fatalf("stream events %v, arguments %q, final %v\n%s", types, args, final, raw)
	}
	// The streamed answer's call, referenced by item id (as the Vercel AI SDK does with store on).
	item := final["output"].([]any)[0].(map[string]any)
	st, b = postJSON(t, u, `{"model":"tiny","tools":`+tools+`,"input":[{"role":"user","content":"what is here?"},`+
		`{"type":"item_reference","id":"`+item["id"].(string)+`"},`+
		`{"type":"function_call_output","call_id":"`+item["call_id"].(string)+`","output":"[\"a.txt\"]"}]}`)
	if _, _, text, _, _ := decodeResp(t, b); st != 200 || text != "Hi!" {
		t.Fatalf("item_reference: %d %s", st, b)
	}
}

// TestResponsesStreamReasoning: a thinking model's reasoning_content streams as a reasoning item before the
// message, with output indexes matching the final response's items. The FAKE llama-server replays a thinking
// model's chunks, which the tiny model cannot write.
func TestResponsesStreamReasoning(t *testing.T) {
	fake := &fakeLlamaServer{reply: func(req map[string]any, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"reasoning_content":"Let me"}`, `{"reasoning_content":" think."}`, `{"content":"Hi"}`, `{"content":"!"}`} {
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"finish_reason":null,"delta":`+d+"}]}\n\n")
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","delta":{}}],"usage":{"prompt_tokens":5,"completion_tokens":4}}`+"\n\ndata: [DONE]\n\n")
	}}
	_, base := fakeGateway(t, fake.start(t))
	events, raw := streamEvents(t, base+"/v1/responses", `{"model":"fake","stream":true,"input":"hi"}`)
	index := map[string]float64{} // item id → output_index its events used
	var reasoning, text string
	var final map[string]any
	for _, e := range events {
		switch e["type"] {
		case "response.output_item.added":
			index[e["item"].(map[string]any)["id"].(string)] = e["output_index"].(float64)
		case "response.reasoning_summary_text.delta":
			reasoning += e["delta"].(string)
		case "response.output_text.delta":
			text += e["delta"].(string)
		case "response.completed":
			final = e["response"].(map[string]any)
		}
	}
	out, _ := final["output"].([]any)
	if reasoning != "Let me think." || text != "Hi!" || len(out) != 2 {
		t.Fatalf("reasoning %q text %q output %v\n%s", reasoning, text, out, raw)
	}
	for i, o := range out {
		it := o.(map[string]any)
		if index[it["id"].(string)] != float64(i) {
			t.Errorf("item %d (%s) was streamed at output_index %v", i, it["type"], index[it["id"].(string)])
		}
	}
	if out[0].(map[string]any)["type"] != "reasoning" || out[1].(map[string]any)["type"] != "message" {
		t.Errorf("output %v: want reasoning, then the message", out)
	}
}
