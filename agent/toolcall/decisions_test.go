package toolcall

import (
	"errors"
	"reflect"
	"testing"
)

// TestDisputableCases pins the decisions the package doc writes down.
func TestDisputableCases(t *testing.T) {
	t.Parallel()
	ts := defectToolSet(t)
	for _, tc := range []struct {
		name        string
		in          string
		tools       *ToolSet
		wantCalls   []string
		wantContent string
		wantErr     error
	}{
		{name: "bare-string arguments are an error, not a guessed argument",
			in: "<tool_call>\n{\"name\": \"echo\", \"arguments\": \"ls -la\"}\n</tool_call>", tools: ts, wantErr: ErrMalformed,
			wantContent: "<tool_call>\n{\"name\": \"echo\", \"arguments\": \"ls -la\"}\n</tool_call>"},
		{name: "double-encoded arguments are decoded",
			in:        "<tool_call>\n{\"name\": \"echo\", \"arguments\": \"\\\"{\\\\\\\"text\\\\\\\": \\\\\\\"hi\\\\\\\"}\\\"\"}\n</tool_call>",
			wantCalls: []string{`echo {"text":"hi"}`}},
		{name: "valid calls beside junk in an array run, the junk is an error",
			in:        "<tool_call>\n[42, {\"name\": \"echo\", \"arguments\": {\"text\": \"a\"}}, {\"nom\": 1}]\n</tool_call>",
			wantCalls: []string{`echo {"text":"a"}`}, wantErr: ErrMalformed},
		{name: "a bare JSON array with junk is content",
			in:          "[{\"name\": \"echo\", \"arguments\": {\"text\": \"a\"}}, 42]",
			wantContent: "[{\"name\": \"echo\", \"arguments\": {\"text\": \"a\"}}, 42]"},
		{name: "malformed JSON inside tags is an error, and the text stays in content",
			in: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": [}\n</tool_call>", wantErr: ErrMalformed,
			wantContent: "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": [}\n</tool_call>"},
		{name: "malformed bare JSON is content",
			in: "{\"name\": \"echo\", \"arguments\": {\"text\": [}", wantContent: "{\"name\": \"echo\", \"arguments\": {\"text\": [}"},
		{name: "an unknown tool in bare JSON is content when tools are known",
			in: "{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}", tools: ts, wantContent: "{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}"},
		{name: "an unknown tool in bare JSON is a call when no tools are known",
			in: "{\"name\": \"Ada\", \"arguments\": {\"age\": 36}}", wantCalls: []string{`Ada {"age":36}`}},
		{name: "an unknown tool inside tags is a call",
			in: "<tool_call>\n{\"name\": \"Ada\", \"arguments\": {}}\n</tool_call>", tools: ts, wantCalls: []string{`Ada {}`}},
	} {
		for name, cut := range map[string]func(string) []string{"whole": whole, "bytewise": bytewise, "random": randomCuts(5)} {
			p := New(Auto)
			p.Init(tc.tools)
			var ev []Event
			for _, c := range cut(tc.in) {
				ev = append(ev, p.Feed(c)...)
			}
			ev = append(ev, p.Close()...)
			r := Collect(ev)
			if g := callStrings(r.Calls); !reflect.DeepEqual(g, tc.wantCalls) || r.Content != tc.wantContent {
				t.Errorf("%s %s: calls %q content %q, want %q and %q", tc.name, name, g, r.Content, tc.wantCalls, tc.wantContent)
			}
			if err := firstErr(ev); (tc.wantErr == nil) != (err == nil) || (err != nil && !errors.Is(err, tc.wantErr)) {
				t.Errorf("%s %s: error %v, want %v", tc.name, name, err, tc.wantErr)
			}
		}
	}
}
