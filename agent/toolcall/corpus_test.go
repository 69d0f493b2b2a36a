package toolcall

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"
)

// corpusCase is one model output from another project's parser tests (vLLM, llama.cpp, Ollama), with the calls
// and content that project expects. Where visor decides a disputable case differently (see the package doc), the
// case says so in note and holds visor's expectation.
type corpusCase struct {
	Source  string          `json:"source"`
	Format  string          `json:"format"`
	Tools   json.RawMessage `json:"tools"` // a tool set's name in tools.json, an inline OpenAI tools array, or absent
	Text    string          `json:"text"`
	Calls   []corpusCall    `json:"calls"`
	Content string          `json:"content"`
	Error   bool            `json:"error"` // the output must produce an error event
	Note    string          `json:"note"`
}

type corpusCall struct {
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

// minCorpusScore is the score the parser reached when the corpus was added; it may only go up.
const minCorpusScore = 140

func TestCorpus(t *testing.T) {
	t.Parallel()
	var cases []corpusCase
	var sets map[string]json.RawMessage
	for name, v := range map[string]any{"testdata/corpus/cases.json": &cases, "testdata/corpus/tools.json": &sets} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	score := 0
	for i, c := range cases {
		if why := runCorpusCase(c, sets); why != "" {
			t.Logf("case %d (%s) %q: %s", i, c.Source, c.Text, why)
			continue
		}
		score++
	}
	t.Logf("corpus score %d/%d", score, len(cases))
	if score < minCorpusScore {
		t.Errorf("corpus score %d/%d, below %d", score, len(cases), minCorpusScore)
	}
}

// runCorpusCase says why the parser got c wrong, or "" when it got it right.
func runCorpusCase(c corpusCase, sets map[string]json.RawMessage) string {
	f, err := ParseFormat(c.Format)
	if err != nil {
		return err.Error()
	}
	var ts *ToolSet
	if len(c.Tools) > 0 {
		raw := c.Tools
		var name string
		if json.Unmarshal(raw, &name) == nil {
			raw = sets[name]
		}
		if ts, err = ParseTools(raw); err != nil {
			return err.Error()
		}
	}
	got := parseStream(f, ts, c.Text, whole)
	if chunked := parseStream(f, ts, c.Text, randomCuts(uint64(len(c.Text)))); !reflect.DeepEqual(chunked, got) {
		return fmt.Sprintf("chunked feeding differs: %+v vs %+v", chunked, got)
	}
	if c.Error != (len(got.Errors) > 0) {
		return fmt.Sprintf("errors %q, want error=%v", got.Errors, c.Error)
	}
	if got.Content != c.Content {
		return fmt.Sprintf("content %q, want %q", got.Content, c.Content)
	}
	if len(got.Calls) != len(c.Calls) {
		return fmt.Sprintf("calls %q, want %d", callStrings(got.Calls), len(c.Calls))
	}
	for i, want := range c.Calls {
		var args any
		if err := json.Unmarshal(got.Calls[i].Arguments, &args); err != nil {
			return err.Error()
		}
		wantArgs := want.Arguments
		if wantArgs == nil {
			wantArgs = map[string]any{}
		}
		if got.Calls[i].Name != want.Name || !reflect.DeepEqual(args, wantArgs) {
			return fmt.Sprintf("call %d: %s %s, want %s %v", i, got.Calls[i].Name, got.Calls[i].Arguments, want.Name, wantArgs)
		}
	}
	return ""
}
