package toolcall

import (
	"fmt"
	"strings"
	"testing"
)

// longStream builds a realistic ~1 MiB agent turn: thinking, prose with markup, Hermes and XML calls, and a
// long multi-line file written through an XML parameter, cut into token-sized chunks (3–6 bytes, as llama-server
// streams).
func longStream() (chunks []string, size int) {
	var b strings.Builder
	b.WriteString("<think>\n")
	for i := 0; b.Len() < 256<<10; i++ {
		fmt.Fprintf(&b, "Step %d: the user wants the report; I compare a < b and check `config.yaml` before calling tools.\n", i)
	}
	b.WriteString("</think>\n\n")
	for i := 0; b.Len() < 768<<10; i++ {
		fmt.Fprintf(&b, "Reading part %d of the report, which mentions <b>bold</b> text and x<y.\n", i)
		fmt.Fprintf(&b, "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"/srv/report/part-%d.md\", \"offset\": %d, \"limit\": 4096}}\n</tool_call>\n", i, i*4096)
		fmt.Fprintf(&b, "<tool_call>\n<function=grep>\n<parameter=pattern>\nTODO|FIXME\n</parameter>\n<parameter=max>\n%d\n</parameter>\n</function>\n</tool_call>\n", i)
	}
	b.WriteString("<tool_call>\n<function=write_file>\n<parameter=path>\n/srv/report/summary.go\n</parameter>\n<parameter=content>\n")
	for b.Len() < 1<<20 {
		b.WriteString("\tif err := run(ctx, \"</param>\"); err != nil {\n\t\treturn fmt.Errorf(\"run: %w\", err)\n\t}\n")
	}
	b.WriteString("</parameter>\n</function>\n</tool_call>")
	s := b.String()
	for i, n := 0, 0; i < len(s); i += n {
		n = min(3+i%4, len(s)-i)
		chunks = append(chunks, s[i:i+n])
	}
	return chunks, len(s)
}

func BenchmarkParserStream(b *testing.B) {
	chunks, size := longStream()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var calls int
	for b.Loop() {
		p := New(Auto)
		calls = 0
		for _, c := range chunks {
			for _, e := range p.Feed(c) {
				if e.Kind == KindCall {
					calls++
				}
			}
		}
		p.Close()
	}
	b.ReportMetric(float64(len(chunks)), "chunks/op")
	if calls == 0 {
		b.Fatal("no calls parsed")
	}
}

func TestLongStreamParses(t *testing.T) {
	t.Parallel()
	chunks, _ := longStream()
	p := New(Auto)
	var ev []Event
	for _, c := range chunks {
		ev = append(ev, p.Feed(c)...)
	}
	r := Collect(append(ev, p.Close()...))
	if len(r.Errors) != 0 {
		t.Fatalf("errors: %v", r.Errors[0])
	}
	last := r.Calls[len(r.Calls)-1]
	if last.Name != "write_file" || !strings.Contains(string(last.Arguments), `\"</param>\"`) || len(r.Calls)%2 != 1 {
		t.Errorf("%d calls, last %s %.80s", len(r.Calls), last.Name, last.Arguments)
	}
	if strings.Contains(r.Content, "<tool_call>") || !strings.Contains(r.Content, "<b>bold</b>") {
		t.Errorf("content %.200q", r.Content)
	}
}
