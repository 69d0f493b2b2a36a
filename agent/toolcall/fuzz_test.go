package toolcall

import (
	"reflect"
	"strings"
	"testing"
)

// fuzzSeeds are the test rows' texts, with the format each was written for.
func fuzzSeeds() (texts []string, formats []Format) {
	add := func(s string, f Format) { texts, formats = append(texts, s), append(formats, f) }
	for _, r := range rows {
		add(r.content, r.format)
	}
	add("<think>a `</think>` b</think><tool_call>{'name': 'x', 'arguments': {'q': 'it's'}}</tool_call>", Auto)
	add("<function_calls><invoke name=\"a\"><parameter name=\"b\">1</parameter></invoke></function_calls>", Auto)
	for _, r := range defectRows {
		add(r.in, r.format)
	}
	for _, r := range dialectRows {
		add(strings.Join(r.chunks, ""), r.format)
	}
	for _, r := range round3Rows {
		add(r.in, r.format)
	}
	return texts, formats
}

// FuzzParser feeds arbitrary text whole and in seeded random chunks, in the format the second argument picks:
// it must never panic, never hold more than the cap, and give the same result either way.
func FuzzParser(f *testing.F) {
	texts, formats := fuzzSeeds()
	for i, s := range texts {
		f.Add(s, uint8(formats[i])|uint8(i%2)<<7, uint64(i))
	}
	ts := defectToolSet(f)
	f.Fuzz(func(t *testing.T, in string, format uint8, seed uint64) {
		var tools *ToolSet
		if format&0x80 != 0 {
			tools = ts
		}
		fuzzOne(t, Format(format&0x7f%6), tools, in, seed)
	})
}

// One target per dialect, so that each gets its own fuzzing time (go test -fuzz FuzzGemma4 …).
func FuzzAuto(f *testing.F)    { fuzzDialect(f, Auto) }
func FuzzHermes(f *testing.F)  { fuzzDialect(f, Hermes) }
func FuzzQwenXML(f *testing.F) { fuzzDialect(f, QwenXML) }
func FuzzGemma4(f *testing.F)  { fuzzDialect(f, Gemma4) }
func FuzzGLM(f *testing.F)     { fuzzDialect(f, GLM) }
func FuzzMistral(f *testing.F) { fuzzDialect(f, Mistral) }

func fuzzDialect(f *testing.F, fm Format) {
	texts, formats := fuzzSeeds()
	for i, s := range texts {
		if formats[i] == fm || formats[i] == Auto {
			f.Add(s, i%2 == 0, uint64(i))
		}
	}
	ts := defectToolSet(f)
	f.Fuzz(func(t *testing.T, in string, typed bool, seed uint64) {
		var tools *ToolSet
		if typed {
			tools = ts
		}
		fuzzOne(t, fm, tools, in, seed)
	})
}

func fuzzOne(t *testing.T, fm Format, tools *ToolSet, in string, seed uint64) {
	const max = 256
	run := func(cut func(string) []string, startInThinking bool) Result {
		p := New(fm)
		p.Init(tools)
		p.MaxPending = max
		p.StartInThinking = startInThinking
		var ev []Event
		for _, c := range cut(in) {
			ev = append(ev, p.Feed(c)...)
			if len(p.content.buf) > max+len(c)+len(tagFuncCallsClose) || len(p.content.held) > max {
				t.Fatalf("pending %d, held %d: over the cap %d", len(p.content.buf), len(p.content.held), max)
			}
		}
		ev = append(ev, p.Close()...)
		for i, e := range ev {
			if e.Kind == KindError && (e.Err == nil || e.Text == "") {
				t.Fatalf("error event without error or text: %+v", e)
			}
			if e.Shown && (i == 0 || ev[i-1].Kind != KindContent || !strings.HasSuffix(ev[i-1].Text, e.Text)) {
				t.Fatalf("error marked shown but its text is not the content before it: %+v", e)
			}
			if (e.Kind == KindCall || e.Kind == KindReasoningCall) && (e.Call == nil || !validName(e.Call.Name) || len(e.Call.Arguments) == 0 || e.Call.Arguments[0] != '{') {
				t.Fatalf("bad call event: %+v", e)
			}
		}
		return Collect(ev)
	}
	want := run(whole, false)
	if got := run(randomCuts(seed), false); !reflect.DeepEqual(got, want) {
		t.Fatalf("chunked result differs:\n got %+v\nwant %+v", got, want)
	}
	// Nothing fed as reasoning is ever an executable call.
	rp := New(fm)
	rp.Init(tools)
	rp.MaxPending = max
	for _, e := range append(rp.FeedReasoning(in), rp.Close()...) {
		if e.Kind == KindCall {
			t.Fatalf("executable call from the reasoning channel: %+v", e.Call)
		}
	}
	// Nor is anything written in a reasoning block the prompt opened, as long as no closer of the dialect
	// ends it.
	closed := false
	for _, tp := range dialects[fm].thinks {
		closed = closed || strings.Contains(in, tp.close)
	}
	if !closed {
		if r := run(randomCuts(seed^1), true); len(r.Calls) > 0 {
			t.Fatalf("executable call from a forced-open reasoning block: %+v", r.Calls)
		}
	}
	// Content never contains a call we returned as a call.
	for _, c := range want.Calls {
		if c.Raw != "" && strings.Contains(want.Content, c.Raw) && strings.Contains(c.Raw, "<") {
			t.Fatalf("call text %q also in content %q", c.Raw, want.Content)
		}
	}
}
