package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

type cmdOut struct {
	Content   string `json:"content"`
	Reasoning string `json:"reasoning"`
	Calls     []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"calls"`
	Errors []string `json:"errors"`
}

// runCmd inspects in as `visor toolcalls parse --format format --tools tools` does, through the JSON form.
func runCmd(t *testing.T, in, format string, tools []byte) (cmdOut, string) {
	t.Helper()
	f, err := ParseFormat(format)
	if err != nil {
		t.Fatal(err)
	}
	var ts *ToolSet
	if len(tools) > 0 {
		if ts, err = ParseTools(tools); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Inspect([]byte(in), f, ts)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ") // as the command prints it
	if err := enc.Encode(rep); err != nil {
		t.Fatal(err)
	}
	var o cmdOut
	dec := json.NewDecoder(bytes.NewReader(out.Bytes()))
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	if dec.More() {
		t.Fatalf("output holds more than one JSON value:\n%s", out.String())
	}
	return o, out.String()
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Get weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]`

func TestInspectArraysNeverNull(t *testing.T) {
	t.Parallel()
	_, raw := runCmd(t, "Hi!", "auto", nil)
	for _, key := range []string{`"calls": []`, `"errors": []`, `"content": "Hi!"`, `"reasoning": ""`} {
		if !strings.Contains(raw, key) {
			t.Errorf("output lacks %s:\n%s", key, raw)
		}
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, format string
		tools            string
		wantContent      string
		wantReasoning    string
		wantCalls        []string
		wantErrs         []string // substrings, one per error, in order
	}{
		{
			name:          "hermes text with thinking",
			in:            "<think>\nweather needed\n</think>\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			format:        "hermes",
			tools:         weatherTools,
			wantContent:   "Checking.",
			wantReasoning: "weather needed",
			wantCalls:     []string{`get_weather {"city":"Paris"}`},
		},
		{
			name:      "unknown tool",
			in:        "<tool_call>\n{\"name\": \"get_wether\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			tools:     weatherTools,
			wantCalls: []string{`get_wether {"city":"Paris"}`},
			wantErrs:  []string{`unknown tool "get_wether" (offered: get_weather)`},
		},
		{
			name:      "schema violation",
			in:        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": \"two\"}}\n</tool_call>",
			tools:     weatherTools,
			wantCalls: []string{`get_weather {"days":"two"}`},
			wantErrs:  []string{`call 0: arguments do not match the tool's schema`},
		},
		{
			name:      "XML value typed by the schema",
			in:        "<tool_call>\n<function=get_weather>\n<parameter=city>\n1984\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
			format:    "qwen-xml",
			tools:     weatherTools,
			wantCalls: []string{`get_weather {"city":"1984","days":3}`},
		},
		{
			name:     "unfinished call",
			in:       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"ci",
			wantErrs: []string{`unfinished tool call`},
		},
		{
			name:          "call in reasoning is an error, not a call",
			in:            "<think>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			wantReasoning: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			wantErrs:      []string{`call to "get_weather" inside reasoning, not executed`},
		},
		{
			name:      "server response JSON with a call left in content (grammar-hermes sample)",
			in:        readTestdata(t, "grammar-hermes.tiny-bigram.response.json"),
			tools:     readTestdata(t, "tools-required-stream.request.json"),
			wantCalls: []string{`get_weather {"city":"J"}`},
		},
		{
			name:      "server response JSON, stories260K under a grammar",
			in:        readTestdata(t, "grammar-hermes.stories260K.response.json"),
			wantCalls: []string{`get_weather {"city":"Yes to be ca"}`},
		},
		{
			name:        "native tool_calls pass through and are checked (complex schema sample)",
			in:          readTestdata(t, "tools-complex-schema.tiny-bigram.response.json"),
			tools:       readTestdata(t, "tools-complex-schema.request.json"),
			wantContent: "Hi!",
			wantCalls:   []string{`book_flight {"from":"LON","seats":5,"window":true,"tags":[""],"pax":{"name":"","age":2}}`},
		},
		{
			name:      "native tool_calls cut at max_tokens (prefill sample)",
			in:        readTestdata(t, "tools-required-prefill.stories260K.response.json"),
			wantCalls: []string{`get_weather {"city":"Yes,"}`, `get_weather {"city":"Yes,"}`},
			wantErrs:  []string{`tool_calls[2] "get_weather": arguments "{"`},
		},
		{
			name:        "SSE stream with streamed native call (tools-required-stream sample)",
			in:          readTestdata(t, "tools-required-stream.tiny-bigram.response.sse"),
			tools:       readTestdata(t, "tools-required-stream.request.json"),
			wantContent: "Hi!",
			wantCalls:   []string{`get_weather {"city":""}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tools []byte
			if tc.tools != "" {
				tools = []byte(tc.tools)
			}
			o, raw := runCmd(t, tc.in, tc.format, tools)
			if o.Content != tc.wantContent || o.Reasoning != tc.wantReasoning {
				t.Errorf("content %q reasoning %q, want %q %q", o.Content, o.Reasoning, tc.wantContent, tc.wantReasoning)
			}
			var calls []string
			for _, c := range o.Calls {
				var buf bytes.Buffer
				if err := json.Compact(&buf, c.Arguments); err != nil {
					t.Fatal(err)
				}
				calls = append(calls, c.Name+" "+buf.String())
			}
			if !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("calls = %q, want %q", calls, tc.wantCalls)
			}
			if len(o.Errors) != len(tc.wantErrs) {
				t.Fatalf("errors = %q, want %d matching %q\n%s", o.Errors, len(tc.wantErrs), tc.wantErrs, raw)
			}
			for i, w := range tc.wantErrs {
				if !strings.Contains(o.Errors[i], w) {
					t.Errorf("error %d = %q, want it to contain %q", i, o.Errors[i], w)
				}
			}
		})
	}
}

func TestBadFormatAndToolsAreErrors(t *testing.T) {
	t.Parallel()
	if _, err := ParseFormat("yaml"); err == nil {
		t.Error("format yaml accepted")
	}
	if _, err := ParseTools([]byte(`{"tools": 3}`)); err == nil {
		t.Error("bad tools accepted")
	}
}

func TestToolSetCheck(t *testing.T) {
	t.Parallel()
	ts, err := ParseTools([]byte(weatherTools))
	if err != nil {
		t.Fatal(err)
	}
	good := Call{Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris","days":2}`)}
	if err := ts.Check(&good); err != nil {
		t.Errorf("valid call: %v", err)
	}
	missing := Call{Name: "get_weather", Arguments: json.RawMessage(`{"days":2}`)}
	if err := ts.Check(&missing); !errors.Is(err, ErrInvalidArguments) {
		t.Errorf("missing required: %v, want ErrInvalidArguments", err)
	}
	unknown := Call{Name: "nope", Arguments: json.RawMessage(`{}`)}
	if err := ts.Check(&unknown); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("unknown tool: %v, want ErrUnknownTool", err)
	}
	// A guessed number becomes the model's exact text where the schema wants a string, and stays a number elsewhere.
	r := Parse("<function=get_weather>\n<parameter=city>\n1984.0\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>", QwenXML)
	if len(r.Errors) > 0 || len(r.Calls) != 1 || string(r.Calls[0].Arguments) != `{"city":1984.0,"days":2}` {
		t.Fatalf("parse: %+v", r)
	}
	c := r.Calls[0]
	if err := ts.Check(&c); err != nil {
		t.Errorf("check: %v", err)
	}
	if string(c.Arguments) != `{"city":"1984.0","days":2}` {
		t.Errorf("arguments after Check = %s", c.Arguments)
	}
}

// The sample streams from a real llama-server, fed delta by delta and byte by byte, give the same result.
func TestSampleStreams(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"tools-required-stream.tiny-bigram.response.sse", "chat-stream.tiny-bigram.response.sse"} {
		msg, err := readSSE([]byte(readTestdata(t, name)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(msg.chunks) < 3 {
			t.Fatalf("%s: %d chunks, want the streamed deltas", name, len(msg.chunks))
		}
		run := func(cut func(string) []string) Result {
			p := New(Auto)
			var ev []Event
			for _, c := range msg.chunks {
				for _, piece := range cut(c.text) {
					if c.reasoning {
						ev = append(ev, p.FeedReasoning(piece)...)
					} else {
						ev = append(ev, p.Feed(piece)...)
					}
				}
			}
			return Collect(append(ev, p.Close()...))
		}
		want := run(whole)
		if want.Content != "Hi!" || len(want.Calls)+len(want.Errors) != 0 {
			t.Errorf("%s: %+v, want content Hi! and nothing else", name, want)
		}
		if got := run(bytewise); !reflect.DeepEqual(got, want) {
			t.Errorf("%s bytewise: %+v, want %+v", name, got, want)
		}
	}
}
