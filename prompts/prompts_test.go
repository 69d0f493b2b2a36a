package prompts

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/visorhq/visor/agent/toolcall"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

var tools = []ToolSpec{
	{
		Name:        "get_weather",
		Description: "Get the current weather for a city. Use <city> names in English & ASCII.",
		Parameters:  json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}`),
	},
	{Name: "list_files", Description: "List files in the working directory."},
}

func TestToolSystemGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    Format
		base string
	}{
		{"hermes_system", Hermes, "You are visor, a careful coding agent."},
		{"hermes_system_nobase", Hermes, ""},
		{"qwen_xml_system", QwenXML, "You are visor, a careful coding agent.\n"},
		{"glm_system", GLM, "You are visor, a careful coding agent."},
		{"gemma4_system", Gemma4, "You are visor, a careful coding agent."},
		{"mistral_system", Mistral, "You are visor, a careful coding agent."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ToolSystem(tc.f, tc.base, tools)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, got)
		})
	}
}

// The tool lines are what Qwen's templates print with tojson: the schema's key order kept, Python separators,
// and no HTML escaping of < > &.
func TestToolLineMatchesTojson(t *testing.T) {
	t.Parallel()
	got, err := ToolSystem(Hermes, "", tools[:1])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city. Use <city> names in English & ASCII.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}}, "required": ["city"]}}}`
	if !strings.Contains(got, "<tools>\n"+want+"\n</tools>") {
		t.Errorf("tool line not found; prompt:\n%s", got)
	}
}

func TestToolSystemErrors(t *testing.T) {
	t.Parallel()
	if _, err := ToolSystem("yaml", "", tools); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("unknown format: %v", err)
	}
	if _, err := ToolSystem(Hermes, "", []ToolSpec{{Name: ""}}); err == nil {
		t.Error("tool without a name accepted")
	}
	if _, err := ToolSystem(QwenXML, "", []ToolSpec{{Name: "x", Parameters: json.RawMessage(`[1]`)}}); err == nil {
		t.Error("non-object parameters accepted")
	}
}

func TestToolResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f             Format
		name, content string
		want          string
	}{
		{Hermes, "get_weather", `{"temp_c":21}`, "<tool_response>\n{\"name\": \"get_weather\", \"content\": {\"temp_c\": 21}}\n</tool_response>"},
		{Hermes, "read", "line <1>\nline 2", "<tool_response>\n{\"name\": \"read\", \"content\": \"line <1>\\nline 2\"}\n</tool_response>"},
		{QwenXML, "read", "line <1>\nline 2", "<tool_response>\nline <1>\nline 2\n</tool_response>"},
		{GLM, "read", "line <1>\nline 2", "<tool_response>\nline <1>\nline 2\n</tool_response>"},
		{Gemma4, "read", "line <1>\nline 2", "<|tool_response>response:read{value:<|\"|>line <1>\nline 2<|\"|>}<tool_response|>"},
		{Mistral, "read", "line <1>\nline 2", "[TOOL_RESULTS]line <1>\nline 2[/TOOL_RESULTS]"},
	} {
		if got := ToolResponse(tc.f, tc.name, tc.content); got != tc.want {
			t.Errorf("ToolResponse(%s, %q) =\n%s\nwant\n%s", tc.f, tc.content, got, tc.want)
		}
	}
}

func TestToolCallRendersTheTaughtSyntax(t *testing.T) {
	args := json.RawMessage(`{"path": ".", "depth": 2}`)
	if got, want := ToolCall(Hermes, "list_dir", args), "<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\", \"depth\": 2}}\n</tool_call>"; got != want {
		t.Errorf("hermes:\n%s\nwant\n%s", got, want)
	}
	// Qwen XML: parameters sorted, strings bare, other values as JSON.
	want := "<tool_call>\n<function=list_dir>\n<parameter=depth>\n2\n</parameter>\n<parameter=path>\n.\n</parameter>\n</function>\n</tool_call>"
	if got := ToolCall(QwenXML, "list_dir", args); got != want {
		t.Errorf("qwen-xml:\n%s\nwant\n%s", got, want)
	}
	if got := ToolCall(Hermes, "now", nil); !strings.Contains(got, `"arguments": {}`) {
		t.Errorf("no arguments: %s", got)
	}
}

// A past call rendered in each dialect reads back, through the parser of that dialect, as the same call: the
// history visor writes is text the model and the parser agree on.
func TestToolCallRoundTrips(t *testing.T) {
	t.Parallel()
	args := json.RawMessage(`{"path":"a b/c.go","depth":2,"all":true,"tags":["x","y"],"opt":{"k":"v"}}`)
	for _, f := range []Format{Hermes, QwenXML, GLM, Gemma4, Mistral} {
		tf, err := toolcall.ParseFormat(string(f))
		if err != nil {
			t.Fatal(err)
		}
		text := ToolCall(f, "list_dir", args)
		r := toolcall.Parse(text, tf)
		if len(r.Calls) != 1 || r.Calls[0].Name != "list_dir" || r.Content != "" || len(r.Errors) > 0 {
			t.Errorf("%s: %q parsed as %+v", f, text, r)
			continue
		}
		var got, want any
		_ = json.Unmarshal(r.Calls[0].Arguments, &got)
		_ = json.Unmarshal(args, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q gave arguments %s, want %s", f, text, r.Calls[0].Arguments, args)
		}
	}
}

// The prompt itself calls nothing: a model that echoes it runs no tool. Only Qwen's template shows a whole call,
// and that one names example_function_name, which no tool is.
func TestToolSystemHoldsNoCall(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{Hermes, QwenXML, GLM, Gemma4, Mistral} {
		tf, _ := toolcall.ParseFormat(string(f))
		sys, err := ToolSystem(f, "", tools)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range toolcall.Parse(sys, tf).Calls {
			if f != QwenXML || c.Name != "example_function_name" {
				t.Errorf("%s: the system prompt parses as a call to %q %s", f, c.Name, c.Arguments)
			}
		}
	}
}
