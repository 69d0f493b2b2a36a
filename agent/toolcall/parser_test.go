package toolcall

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// feed runs a whole message through a fresh Parser, cutting each channel with cut, and returns every event.
func feed(f Format, startInThinking bool, reasoning, content string, cut func(string) []string) []Event {
	p := New(f)
	p.StartInThinking = startInThinking
	var ev []Event
	for _, c := range cut(reasoning) {
		ev = append(ev, p.FeedReasoning(c)...)
	}
	for _, c := range cut(content) {
		ev = append(ev, p.Feed(c)...)
	}
	return append(ev, p.Close()...)
}

func whole(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func bytewise(s string) []string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = s[i : i+1]
	}
	return out
}

func randomCuts(seed uint64) func(string) []string {
	return func(s string) []string {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		var out []string
		for len(s) > 0 {
			n := 1 + r.IntN(min(len(s), 12))
			out = append(out, s[:n])
			s = s[n:]
		}
		return out
	}
}

// chunkings are the ways every streamed case is fed; all must give the same Result.
var chunkings = map[string]func(string) []string{
	"bytewise": bytewise,
	"random1":  randomCuts(1),
	"random2":  randomCuts(2),
	"random3":  randomCuts(3),
	"random42": randomCuts(42),
}

func callStrings(cs []Call) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name+" "+string(c.Arguments))
	}
	return out
}

type row struct {
	name            string // names the upstream issue whose text shape the row reproduces
	format          Format
	startInThinking bool
	reasoning       string // reasoning_content channel
	content         string
	wantContent     string
	wantReasoning   string
	wantCalls       []string // "name {args}"
	wantReasonCalls []string
	wantErr         error  // sentinel every error must wrap; nil means no errors
	wantRepaired    string // substring of the first call's Repaired
}

var rows = []row{
	{
		name:        "llama.cpp#20260 prose before the call",
		content:     "I'll check the current weather in Paris for you.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantContent: "I'll check the current weather in Paris for you.",
		wantCalls:   []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:      "llama.cpp#20761 stray </tool_call> after an unwrapped XML call",
		format:    QwenXML,
		content:   "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:      "llama.cpp#20761 stray </tool_call> after a closed block",
		content:   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:      "llama.cpp#24644 multi-line JSON inside <parameter>",
		format:    QwenXML,
		content:   "<tool_call>\n<function=write>\n<parameter=content>\n{\n  \"name\": \"demo\",\n  \"version\": 2\n}\n\n</parameter>\n<parameter=path>\n/tmp/package.json\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write {"content":{"name":"demo","version":2},"path":"/tmp/package.json"}`},
	},
	{
		name:      "llama.cpp#24644 code whose text contains </parameter>",
		format:    QwenXML,
		content:   "<tool_call>\n<function=write>\n<parameter=content>\nx = \"</parameter>\"\nprint(x)\n</parameter>\n<parameter=path>\n/tmp/a.py\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write {"content":"x = \"</parameter>\"\nprint(x)","path":"/tmp/a.py"}`},
	},
	{
		name:            "llama.cpp#22684 call inside reasoning_content is reported, not executed",
		reasoning:       "The user wants the weather, so I call the tool.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantReasoning:   "The user wants the weather, so I call the tool.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantReasonCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:          "llama.cpp#27661 literal </think> inside thinking",
		content:       "<think>\nThe template closes thinking with `</think>` before the answer, so I must not write \"</think>\" early.\n</think>\n\nHello!",
		wantReasoning: "The template closes thinking with `</think>` before the answer, so I must not write \"</think>\" early.",
		wantContent:   "Hello!",
	},
	{
		name:            "ik_llama.cpp PR #958 call before thinking closed",
		content:         "<think>\nI need the weather first.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantReasoning:   "I need the weather first.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantReasonCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:          "lmstudio-bug-tracker#1592 prose mentioning <tool_call> inside <think>",
		content:       "<think>\nI should answer with a <tool_call> block for get_weather.\n</think>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantReasoning: "I should answer with a <tool_call> block for get_weather.",
		wantCalls:     []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:      "llama.cpp#14101 parallel calls, not only the first",
		content:   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`, `get_time {"tz":"Europe/Paris"}`},
	},
	{
		name:      "llama.cpp#14101 two calls on separate lines in one block",
		content:   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`, `get_weather {"city":"Rome"}`},
	},
	{
		name:    "pwilkin/llama.cpp#9 several consecutive <tool_call> blocks",
		format:  QwenXML,
		content: "<tool_call>\n<function=bash>\n<parameter=command>\ntest -d .planning && echo \"exists\" || echo \"missing\"\n</parameter>\n<parameter=description>\nCheck if planning directory exists\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=read>\n<parameter=filePath>\n/home/gary/dev/opencode_rs/.planning/STATE.md\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=read>\n<parameter=filePath>\n/home/gary/dev/opencode_rs/.planning/ROADMAP.md\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{
			`bash {"command":"test -d .planning && echo \"exists\" || echo \"missing\"","description":"Check if planning directory exists"}`,
			`read {"filePath":"/home/gary/dev/opencode_rs/.planning/STATE.md"}`,
			`read {"filePath":"/home/gary/dev/opencode_rs/.planning/ROADMAP.md"}`,
		},
	},
	{
		name:      "lemonade-sdk/lemonade#1562 calls separated by ';'",
		content:   "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>;<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`, `get_weather {"city":"Rome"}`},
	},
	{
		name:      "lemonade-sdk/lemonade#1562 ';' between calls inside one block",
		content:   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}; {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`, `get_weather {"city":"Rome"}`},
	},
	{
		name:         "llama.cpp#22072 missing closing quote",
		content:      "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/etc/hosts}}\n</tool_call>",
		wantCalls:    []string{`read_file {"path":"/etc/hosts"}`},
		wantRepaired: "missing closing quote",
	},
	{
		name:         "hermes-agent#12068 unescaped apostrophe in a single-quoted dict",
		content:      "<tool_call>\n{'name': 'web_search', 'arguments': {'query': 'what's the weather in Paris', 'limit': 5, 'safe': True, 'region': None}}\n</tool_call>",
		wantCalls:    []string{`web_search {"query":"what's the weather in Paris","limit":5,"safe":true,"region":null}`},
		wantRepaired: "unescaped apostrophe",
	},
	{
		name:    "hermes-agent#13042 truncated JSON",
		content: "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls -la /ho",
		wantErr: ErrUnclosed,
	},
	{
		name:         "hermes-agent#13042 double-escaped quotes",
		content:      "<tool_call>\n{\\\"name\\\": \\\"terminal\\\", \\\"arguments\\\": {\\\"command\\\": \\\"ls -la\\\"}}\n</tool_call>",
		wantCalls:    []string{`terminal {"command":"ls -la"}`},
		wantRepaired: "double-escaped",
	},
	{
		name:         "hermes-agent#13042 raw newlines inside a string",
		content:      "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"line one\nline two\"}}\n</tool_call>",
		wantCalls:    []string{`write_file {"path":"a.txt","content":"line one\nline two"}`},
		wantRepaired: "raw newline",
	},
	{
		name:      "hermes-agent PR #83023 bare JSON call left in content (Auto)",
		content:   "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
		wantCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:        "hermes-agent PR #83023 bare JSON stays content outside Auto",
		format:      Hermes,
		content:     "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
		wantContent: "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
	},
	{
		name:        "hermes-agent PR #83023 JSON that is not a call stays content",
		content:     "{\"answer\": 42, \"unit\": \"m\"}",
		wantContent: "{\"answer\": 42, \"unit\": \"m\"}",
	},
	{
		name:        "hermes-agent PR #83023 JSON followed by prose is content",
		content:     "{\"name\": \"x\", \"arguments\": {}} is the shape of a call.",
		wantContent: "{\"name\": \"x\", \"arguments\": {}} is the shape of a call.",
	},
	{
		name:        "hermes-agent PR #742 <function=…> without wrapper, after prose",
		format:      QwenXML,
		content:     "Reading it now.\n<function=read>\n<parameter=path>\nREADME.md\n</parameter>\n</function>",
		wantContent: "Reading it now.",
		wantCalls:   []string{`read {"path":"README.md"}`},
	},
	{
		name:      "hermes-agent PR #742 no opening tag, only </tool_call>",
		format:    Hermes,
		content:   "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		name:    "hermes-agent PR #7693 finish_reason length inside an XML call",
		format:  QwenXML,
		content: "<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.md\n</parameter>\n<parameter=content>\n# Notes\nThe first",
		wantErr: ErrUnclosed,
	},
	{
		name:    "hermes-agent PR #7693 all parameters closed but </function> missing",
		format:  QwenXML,
		content: "<tool_call>\n<function=write_file>\n<parameter=path>\nnotes.md\n</parameter>\n",
		wantErr: ErrUnclosed,
	},
	{
		name:      "llama.cpp PR #16755 over-precise numbers kept as written",
		content:   "<tool_call>\n{\"name\": \"set_point\", \"arguments\": {\"lat\": 48.85660000000000025011104298755526542663574, \"temp\": 72.00000000000000000001, \"n\": 12345678901234567890}}\n</tool_call>",
		wantCalls: []string{`set_point {"lat":48.85660000000000025011104298755526542663574,"temp":72.00000000000000000001,"n":12345678901234567890}`},
	},
	{
		name:      "hermes-agent#8965 Anthropic-style <function_calls><invoke> as text",
		content:   "<function_calls>\n<invoke name=\"Bash\">\n<parameter name=\"command\">ls -la</parameter>\n<parameter name=\"timeout\">30</parameter>\n</invoke>\n</function_calls>",
		wantCalls: []string{`Bash {"command":"ls -la","timeout":30}`},
	},
	{
		name:      "hermes-agent#8965 namespaced invoke",
		content:   "<function_calls>\n<" + nsPrefix + "invoke name=\"Read\">\n<" + nsPrefix + "parameter name=\"path\">/tmp/x</" + nsPrefix + "parameter>\n</" + nsPrefix + "invoke>\n</function_calls>",
		wantCalls: []string{`Read {"path":"/tmp/x"}`},
	},
	{
		name:      "Hermes README: parameters key and arguments as a JSON string",
		content:   "<tool_call>\n{\"name\": \"a\", \"parameters\": {\"x\": 1}}\n</tool_call><tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"y\\\": [1, 2]}\"}\n</tool_call>",
		wantCalls: []string{`a {"x":1}`, `b {"y":[1,2]}`},
	},
	{
		name:            "Qwen3.5 generation opens inside <think> (StartInThinking)",
		format:          QwenXML,
		startInThinking: true,
		content:         "The user asks for a file.\n</think>\n\n<tool_call>\n<function=read>\n<parameter=path>\na.txt\n</parameter>\n</function>\n</tool_call>",
		wantReasoning:   "The user asks for a file.",
		wantCalls:       []string{`read {"path":"a.txt"}`},
	},
	{
		name:        "markup that is not a call stays content",
		content:     "Use a < b, <b>bold</b>, `<think>` and <tool> in docs.",
		wantContent: "Use a < b, <b>bold</b>, `<think>` and <tool> in docs.",
	},
	{
		name:          "[TOOL_CALLS] mentioned in thinking stays reasoning",
		content:       "<think>I could write [TOOL_CALLS] here</think>Answer.",
		wantReasoning: "I could write [TOOL_CALLS] here",
		wantContent:   "Answer.",
	},
	{
		name:            "a Mistral call inside thinking is reported, not executed",
		content:         "<think>[TOOL_CALLS]f[ARGS]{\"a\":1}</think>ok",
		wantReasoning:   "[TOOL_CALLS]f[ARGS]{\"a\":1}",
		wantContent:     "ok",
		wantReasonCalls: []string{`f {"a":1}`},
	},
	{
		name:            "a Gemma call inside thinking is reported, not executed",
		content:         "<think><|tool_call>call:f{a:1}<tool_call|></think>ok",
		wantReasoning:   "<|tool_call>call:f{a:1}<tool_call|>",
		wantContent:     "ok",
		wantReasonCalls: []string{`f {"a":1}`},
	},
	{
		name:        "malformed call body",
		content:     "<tool_call>\nget_weather(city=\"Paris\")\n</tool_call>",
		wantContent: "<tool_call>\nget_weather(city=\"Paris\")\n</tool_call>",
		wantErr:     ErrMalformed,
	},
	{
		name:        "call without a name",
		content:     "<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantContent: "<tool_call>\n{\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		wantErr:     ErrMalformed,
	},
}

func TestParserRows(t *testing.T) {
	t.Parallel()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			ev := feed(r.format, r.startInThinking, r.reasoning, r.content, whole)
			got := Collect(ev)
			if got.Content != r.wantContent {
				t.Errorf("content = %q, want %q", got.Content, r.wantContent)
			}
			if got.Reasoning != r.wantReasoning {
				t.Errorf("reasoning = %q, want %q", got.Reasoning, r.wantReasoning)
			}
			if g := callStrings(got.Calls); !reflect.DeepEqual(g, r.wantCalls) {
				t.Errorf("calls = %q, want %q", g, r.wantCalls)
			}
			if g := callStrings(got.ReasoningCalls); !reflect.DeepEqual(g, r.wantReasonCalls) {
				t.Errorf("reasoning calls = %q, want %q", g, r.wantReasonCalls)
			}
			if r.wantRepaired != "" && (len(got.Calls) == 0 || !strings.Contains(got.Calls[0].Repaired, r.wantRepaired)) {
				t.Errorf("repaired = %+v, want a note containing %q", got.Calls, r.wantRepaired)
			}
			if r.wantRepaired == "" {
				for _, c := range got.Calls {
					if c.Repaired != "" {
						t.Errorf("call %s repaired %q, want as written", c.Name, c.Repaired)
					}
				}
			}
			checkErrors(t, ev, r.wantErr)

			for name, cut := range chunkings {
				streamed := Collect(feed(r.format, r.startInThinking, r.reasoning, r.content, cut))
				if !reflect.DeepEqual(streamed, got) {
					t.Errorf("%s feeding differs:\n got %+v\nwant %+v", name, streamed, got)
				}
			}
		})
	}
}

func checkErrors(t *testing.T, ev []Event, want error) {
	t.Helper()
	n := 0
	for _, e := range ev {
		if e.Kind != KindError {
			continue
		}
		n++
		if want == nil || !errors.Is(e.Err, want) {
			t.Errorf("error %v, want %v", e.Err, want)
		}
		if e.Text == "" {
			t.Errorf("error %v carries no offending text", e.Err)
		}
	}
	if want != nil && n == 0 {
		t.Errorf("no error, want %v", want)
	}
}

// Content before a tag is emitted at once; a partial tag is never emitted.
func TestHoldsBackOnlyPartialTags(t *testing.T) {
	t.Parallel()
	p := New(Auto)
	steps := []struct {
		in   string
		want string // content emitted by this Feed
	}{
		{"Hello", "Hello"},
		{" world <tool_", " world "},
		{"call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_", ""},
		{"call>\nDone <thi", "\nDone "},
		{"nk>secret</think> ok", " ok"},
		{" a <fun", " a "},
		{"ny> c", "<funny> c"},
	}
	for _, s := range steps {
		var got strings.Builder
		for _, e := range p.Feed(s.in) {
			if e.Kind == KindContent {
				got.WriteString(e.Text)
			}
		}
		if got.String() != s.want {
			t.Errorf("Feed(%q) content = %q, want %q", s.in, got.String(), s.want)
		}
	}
	r := Collect(p.Close())
	if r.Content != "" || len(r.Errors) > 0 {
		t.Errorf("Close = %+v, want nothing left", r)
	}
}

// A message that starts like JSON is held (it may be a bare call) only until it is clearly prose.
func TestJSONLikeProseStreams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ first, rest string }{
		{"`go test` r", "uns the tests."},
		{"[1] F", "irst point."},
		{"{\"a\": \"}\"} is an o", "bject."},
	} {
		p := New(Auto)
		r := Collect(p.Feed(tc.first))
		if r.Content != strings.TrimSpace(tc.first) {
			t.Errorf("Feed(%q) content = %q, want it streamed at once", tc.first, r.Content)
		}
		if r := Collect(append(p.Feed(tc.rest), p.Close()...)); r.Content != tc.rest {
			t.Errorf("rest = %q, want %q", r.Content, tc.rest)
		}
	}
	// Still a call when the whole message is JSON calls, in a fence or in a row.
	for _, in := range []string{
		"```json\n{\"name\": \"f\", \"arguments\": {\"s\": \"}\"}}\n```",
		"{\"name\": \"f\", \"arguments\": {}}\n{\"name\": \"g\", \"arguments\": {}}",
	} {
		if r := Parse(in, Auto); len(r.Calls) == 0 || r.Content != "" {
			t.Errorf("Parse(%q) = %+v, want calls only", in, r)
		}
	}
}

func TestCallEmittedWhenComplete(t *testing.T) {
	t.Parallel()
	p := New(Hermes)
	if ev := p.Feed("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_cal"); len(ev) != 0 {
		t.Fatalf("events before the end tag: %+v", ev)
	}
	ev := p.Feed("l>")
	if len(ev) != 1 || ev[0].Kind != KindCall || ev[0].Call.Name != "f" || ev[0].Call.ID != "call_1" {
		t.Fatalf("events = %+v, want one call f", ev)
	}
}

func TestParseDetectsMissingThinkOpen(t *testing.T) {
	t.Parallel()
	r := Parse("I must call the tool.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n</think>\nAnswer.", Auto)
	if len(r.Calls) != 0 || len(r.ReasoningCalls) != 1 || r.Content != "Answer." {
		t.Errorf("Parse = %+v, want the call reported as inside reasoning and content %q", r, "Answer.")
	}
}

// Without StartInThinking a streaming parser cannot know that a message began inside thinking until </think>
// arrives; calls it already emitted are then named in an error so the agent does not run them.
func TestLateThinkCloseFlagsEarlierCalls(t *testing.T) {
	t.Parallel()
	text := "Plan: call the tool.\n<tool_call>\n{\"name\": \"rm\", \"arguments\": {\"path\": \"/\"}}\n</tool_call>\n</think>\nAsking first."
	for name, cut := range chunkings {
		ev := feed(Auto, false, "", text, cut)
		err := firstErr(ev)
		if !errors.Is(err, ErrLateThinkClose) || !strings.Contains(err.Error(), "call_1") {
			t.Errorf("%s: error %v, want ErrLateThinkClose naming call_1", name, err)
		}
	}
	if r := Parse(text, Auto); len(r.Calls) != 0 || len(r.ReasoningCalls) != 1 || len(r.Errors) != 0 {
		t.Errorf("Parse = %+v, want the call only as a reasoning call", r)
	}
}

func TestPendingCap(t *testing.T) {
	t.Parallel()
	const max = 64
	big := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name, in    string
		wantErr     bool
		wantContent string
	}{
		{"unclosed call", "<tool_call>{\"name\": \"" + big, true, ""},
		{"closed late", "<tool_call>{\"name\": \"" + big + "\"}</tool_call>after", true, "after"},
		{"thinking prose", "<think>I use <tool_call> " + big + "</think>done", false, "done"},
		{"held JSON", "{\"a\": \"" + big + "\"}", false, "{\"a\": \"" + big + "\"}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for name, cut := range map[string]func(string) []string{"whole": whole, "bytewise": bytewise, "random": randomCuts(7)} {
				p := New(Auto)
				p.MaxPending = max
				var ev []Event
				for _, c := range cut(tc.in) {
					ev = append(ev, p.Feed(c)...)
					if len(p.content.buf) > max+len(c)+len(tagFuncCallsClose) || len(p.content.held) > max {
						t.Fatalf("%s: pending %d/%d bytes exceeds the cap", name, len(p.content.buf), len(p.content.held))
					}
				}
				r := Collect(append(ev, p.Close()...))
				if (len(r.Errors) > 0) != tc.wantErr || r.Content != tc.wantContent || len(r.Calls) != 0 {
					t.Errorf("%s: %+v", name, r)
				}
				if tc.wantErr && !errors.Is(firstErr(ev), ErrTooLarge) {
					t.Errorf("%s: error %v, want ErrTooLarge", name, firstErr(ev))
				}
			}
		})
	}
}

func firstErr(ev []Event) error {
	for _, e := range ev {
		if e.Kind == KindError {
			return e.Err
		}
	}
	return nil
}

func TestLooksLikeCalls(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"Hi!":             false,
		"":                false,
		"a < b":           false,
		"{\"answer\": 1}": false,
		"<tool_call>\n{\"name\": \"f\"}\n</tool_call>":              true,
		"{\"name\": \"f\", \"arguments\": {}}":                      true,
		"<function=f>\n</function>":                                 true,
		"<tool_call>\n{\"name\": \"f\", \"argu":                     true, // truncated, but a call was meant
		"Thinking <tool_call>{\"name\":\"f\"}</tool_call></think>x": true,
	} {
		if got := LooksLikeCalls(in); got != want {
			t.Errorf("LooksLikeCalls(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestParserReusableAfterClose(t *testing.T) {
	t.Parallel()
	p := New(Auto)
	p.Feed("<tool_call>{\"name\": \"a\"")
	if r := Collect(p.Close()); len(r.Errors) != 1 {
		t.Fatalf("first message: %+v", r)
	}
	r := Collect(append(p.Feed("<tool_call>{\"name\": \"b\"}</tool_call>"), p.Close()...))
	if got := callStrings(r.Calls); !reflect.DeepEqual(got, []string{"b {}"}) || r.Calls[0].ID != "call_1" {
		t.Errorf("second message: %+v", r)
	}
}

func ExampleParser() {
	p := New(Auto)
	for _, tok := range []string{"Let me look.\n", "<tool_", "call>\n{\"name\": \"read\", ", "\"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>"} {
		for _, e := range p.Feed(tok) {
			switch e.Kind {
			case KindContent:
				fmt.Printf("content %q\n", e.Text)
			case KindCall:
				fmt.Printf("call %s %s\n", e.Call.Name, e.Call.Arguments)
			}
		}
	}
	p.Close()
	// Output:
	// content "Let me look.\n"
	// call read {"path":"a.txt"}
}
