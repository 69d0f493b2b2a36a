package toolcall

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParser feeds arbitrary text whole and in seeded random chunks: it must never panic, never hold more than
// the cap, and give the same result either way.
func FuzzParser(f *testing.F) {
	for _, r := range rows {
		f.Add(r.content, uint8(r.format), uint64(len(r.name)))
	}
	f.Add("<think>a `</think>` b</think><tool_call>{'name': 'x', 'arguments': {'q': 'it's'}}</tool_call>", uint8(0), uint64(9))
	f.Add("<function_calls><invoke name=\"a\"><parameter name=\"b\">1</parameter></invoke></function_calls>", uint8(0), uint64(3))
	for _, r := range defectRows {
		f.Add(r.in, uint8(r.format)|0x80, uint64(len(r.name)))
	}
	for _, r := range dialectRows {
		f.Add(strings.Join(r.chunks, ""), uint8(r.format)|0x80, uint64(len(r.name)))
	}
	ts := defectToolSet(f)
	f.Fuzz(func(t *testing.T, in string, format uint8, seed uint64) {
		const max = 256
		fm := Format(format & 0x7f % 6)
		var tools *ToolSet
		if format&0x80 != 0 {
			tools = ts
		}
		run := func(cut func(string) []string) Result {
			p := New(fm)
			p.Init(tools)
			p.MaxPending = max
			var ev []Event
			for _, c := range cut(in) {
				ev = append(ev, p.Feed(c)...)
				if len(p.content.buf) > max+len(c)+len(tagFuncCallsClose) || len(p.content.held) > max {
					t.Fatalf("pending %d, held %d: over the cap %d", len(p.content.buf), len(p.content.held), max)
				}
			}
			for _, e := range ev {
				if e.Kind == KindError && (e.Err == nil || e.Text == "") {
					t.Fatalf("error event without error or text: %+v", e)
				}
				if (e.Kind == KindCall || e.Kind == KindReasoningCall) && (e.Call == nil || e.Call.Name == "" || len(e.Call.Arguments) == 0 || e.Call.Arguments[0] != '{') {
					t.Fatalf("bad call event: %+v", e)
				}
			}
			return Collect(append(ev, p.Close()...))
		}
		want := run(whole)
		if got := run(randomCuts(seed)); !reflect.DeepEqual(got, want) {
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
		// Content never contains a call we returned as a call.
		for _, c := range want.Calls {
			if c.Raw != "" && strings.Contains(want.Content, c.Raw) && strings.Contains(c.Raw, "<") {
				t.Fatalf("call text %q also in content %q", c.Raw, want.Content)
			}
		}
	})
}
