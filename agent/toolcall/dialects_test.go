package toolcall

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// dialectRow is a recorded stream: the chunks as a server streams them (one token or a few per chunk, split
// where the family's tokenizer splits special tokens off), fed as recorded and also whole, byte by byte and in
// random chunks.
type dialectRow struct {
	name        string
	format      Format
	typed       bool // parse with defectTools' schemas
	chunks      []string
	wantCalls   []string
	wantContent string
	wantErr     error
}

var dialectRows = []dialectRow{
	// Gemma 4 (vLLM tests/tool_parsers/test_gemma4_tool_parser.py shapes).
	{
		name: "gemma4 prose then one call", format: Gemma4,
		chunks:      []string{"Let", " me", " check", " the", " weather", " for", " you", ". ", "<|tool_call>", "call", ":", "get", "_weather", "{", "location", ":", `<|"|>`, "Paris", `<|"|>`, "}", "<tool_call|>"},
		wantCalls:   []string{`get_weather {"location":"Paris"}`},
		wantContent: "Let me check the weather for you.",
	},
	{
		name: "gemma4 nested object, array, number and boolean", format: Gemma4,
		chunks:    []string{"<|tool_call>", "call", ":", "complex", "_function", "{", "nested", ":{", "inner", ":", `<|"|>`, "value", `<|"|>`, "},", "list", ":[", `<|"|>`, "a", `<|"|>`, ",", `<|"|>`, "b", `<|"|>`, "],", "count", ":", "42", ",", "active", ":", "true", ",", "score", ":", "3", ".", "14", ",", "gone", ":", "null", "}", "<tool_call|>"},
		wantCalls: []string{`complex_function {"nested":{"inner":"value"},"list":["a","b"],"count":42,"active":true,"score":3.14,"gone":null}`},
	},
	{
		name: "gemma4 two calls in a row", format: Gemma4,
		chunks:    []string{"<|tool_call>", "call:get_weather{location:", `<|"|>`, "London", `<|"|>`, "}", "<tool_call|>", "<|tool_call>", "call:get_time{location:", `<|"|>`, "London", `<|"|>`, "}", "<tool_call|>"},
		wantCalls: []string{`get_weather {"location":"London"}`, `get_time {"location":"London"}`},
	},
	{
		name: "gemma4 a string holding the end tag, braces and commas", format: Gemma4,
		chunks:    []string{"<|tool_call>", "call:write_file{path:", `<|"|>`, "a.md", `<|"|>`, ",content:", `<|"|>`, "end }, then ", "<tool_call|>", " and {x:1}", `<|"|>`, "}", "<tool_call|>"},
		wantCalls: []string{`write_file {"path":"a.md","content":"end }, then <tool_call|> and {x:1}"}`},
	},
	{
		name: "gemma4 a bare number for a string field is typed as the schema says", format: Gemma4, typed: true,
		chunks:    []string{"<|tool_call>", "call:search{query:", "94110", ",count:", "3", ",verbose:", "false", "}", "<tool_call|>"},
		wantCalls: []string{`search {"query":"94110","count":3,"verbose":false}`},
	},
	{
		name: "gemma4 cut at max_tokens", format: Gemma4,
		chunks:  []string{"<|tool_call>", "call:get_weather{location:", `<|"|>`, "Lon"},
		wantErr: ErrUnclosed,
	},
	// GLM-4.5 / 4.7 (vLLM tests/tool_parsers/test_glm4_moe_tool_parser.py, test_glm47_moe_tool_parser.py).
	{
		name: "glm-4.5 thinking, prose, one call on separate lines", format: GLM,
		chunks:      []string{"<think>", "I want", " the weather.", "</think>", "\n\nI will", " help you.", "\n", "<tool_call>", "get_weather", "\n", "<arg_key>", "city", "</arg_key>", "\n", "<arg_value>", "Beijing", "</arg_value>", "\n", "<arg_key>", "date", "</arg_key>", "\n", "<arg_value>", "2025-08-01", "</arg_value>", "\n", "</tool_call>"},
		wantCalls:   []string{`get_weather {"city":"Beijing","date":"2025-08-01"}`},
		wantContent: "I will help you.",
	},
	{
		name: "glm-4.7 inline tags typed from the schema", format: GLM, typed: true,
		chunks:    []string{"<tool_call>", "search", "<arg_key>", "count", "</arg_key>", "<arg_value>", "3", "</arg_value>", "<arg_key>", "query", "</arg_key>", "<arg_value>", "42", "</arg_value>", "<arg_key>", "filters", "</arg_key>", "<arg_value>", `{"lang": "go"}`, "</arg_value>", "</tool_call>"},
		wantCalls: []string{`search {"count":3,"query":"42","filters":{"lang":"go"}}`},
	},
	{
		name: "glm no arguments", format: GLM,
		chunks:    []string{"<tool_call>", "get_current_time", "\n", "</tool_call>"},
		wantCalls: []string{`get_current_time {}`},
	},
	{
		name: "glm two calls with prose between", format: GLM,
		chunks:      []string{"I will check both.", "\n\n", "<tool_call>", "get_weather\n", "<arg_key>", "city", "</arg_key>\n", "<arg_value>", "Beijing", "</arg_value>\n", "</tool_call>", "\n\nMeanwhile, Shanghai.\n\n", "<tool_call>", "get_weather\n", "<arg_key>", "city", "</arg_key>\n", "<arg_value>", "Shanghai", "</arg_value>\n", "</tool_call>"},
		wantCalls:   []string{`get_weather {"city":"Beijing"}`, `get_weather {"city":"Shanghai"}`},
		wantContent: "I will check both.\n\n\n\nMeanwhile, Shanghai.",
	},
	{
		name: "glm a value that holds </arg_value> itself", format: GLM, typed: true,
		chunks:    []string{"<tool_call>", "write_file", "<arg_key>", "path", "</arg_key>", "<arg_value>", "t.xml", "</arg_value>", "<arg_key>", "content", "</arg_key>", "<arg_value>", "<x>", "</arg_value>", " is a tag", "</arg_value>", "</tool_call>"},
		wantCalls: []string{`write_file {"path":"t.xml","content":"<x></arg_value> is a tag"}`},
	},
	// Mistral (vLLM tests/tool_parsers/test_mistral_tool_parser.py; llama.cpp's Mistral Small 3.2 / Devstral /
	// Magistral templates write NAME[ARGS]{…}).
	{
		name: "mistral v11 one call", format: Mistral,
		chunks:    []string{"[TOOL_CALLS]", "get", "_weather", "[ARGS]", "{\"", "city", "\":", " \"", "Paris", "\"}"},
		wantCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name: "mistral v11 two calls", format: Mistral,
		chunks:    []string{"[TOOL_CALLS]", "add", "[ARGS]", `{"a": 3.5, "b": 4}`, "[TOOL_CALLS]", "multiply", "[ARGS]", `{"a": 3, "b": 6}`},
		wantCalls: []string{`add {"a":3.5,"b":4}`, `multiply {"a":3,"b":6}`},
	},
	{
		name: "mistral pre-v11 JSON array after prose", format: Mistral,
		chunks:      []string{"Hello", "[TOOL_CALLS]", " [", `{"name": "add", "arguments": {"a": 1, "b": 2}}`, ", ", `{"name": "get_current_weather", "arguments": {"city": "San Francisco"}}`, "]"},
		wantCalls:   []string{`add {"a":1,"b":2}`, `get_current_weather {"city":"San Francisco"}`},
		wantContent: "Hello",
	},
	{
		name: "mistral call id, braces inside a string, prose after the call", format: Mistral,
		chunks:      []string{"[TOOL_CALLS]", "write_file", "[CALL_ID]", "a1b2c3d4e", "[ARGS]", `{"path": "x.json", "content": "{\"k\": [1, \"}\"]}"}`, "\n", "Done."},
		wantCalls:   []string{`write_file {"path":"x.json","content":"{\"k\": [1, \"}\"]}"}`},
		wantContent: "Done.",
	},
	{
		name: "mistral without [ARGS] (special tokens skipped)", format: Mistral,
		chunks:    []string{"[TOOL_CALLS]", "add_this_and_that", `{"a": 3.5, "b": 4}`},
		wantCalls: []string{`add_this_and_that {"a":3.5,"b":4}`},
	},
	{
		name: "mistral cut at max_tokens", format: Mistral,
		chunks:  []string{"[TOOL_CALLS]", "get_weather", "[ARGS]", `{"city": "Par`},
		wantErr: ErrUnclosed,
	},
}

func TestDialectStreams(t *testing.T) {
	t.Parallel()
	ts := defectToolSet(t)
	for _, r := range dialectRows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			var tools *ToolSet
			if r.typed {
				tools = ts
			}
			text := strings.Join(r.chunks, "")
			cuts := map[string]func(string) []string{
				"recorded": func(string) []string { return r.chunks },
				"whole":    whole,
			}
			for name, cut := range chunkings {
				cuts[name] = cut
			}
			for _, f := range []Format{r.format, Auto} {
				for name, cut := range cuts {
					p := New(f)
					p.Init(tools)
					var ev []Event
					for _, c := range cut(text) {
						ev = append(ev, p.Feed(c)...)
					}
					ev = append(ev, p.Close()...)
					got := Collect(ev)
					if g := callStrings(got.Calls); !reflect.DeepEqual(g, r.wantCalls) {
						t.Errorf("%v %s: calls\n got %q\nwant %q", f, name, g, r.wantCalls)
					}
					if got.Content != r.wantContent {
						t.Errorf("%v %s: content %q, want %q", f, name, got.Content, r.wantContent)
					}
					for _, e := range ev {
						if e.Kind == KindError && (r.wantErr == nil || !errors.Is(e.Err, r.wantErr)) {
							t.Errorf("%v %s: error %v, want %v", f, name, e.Err, r.wantErr)
						}
					}
					if r.wantErr != nil && len(got.Errors) == 0 {
						t.Errorf("%v %s: no error, want %v", f, name, r.wantErr)
					}
				}
			}
		})
	}
}
