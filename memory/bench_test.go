package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// reportLatency reports the p50 and p99 of per-operation durations, which ns/op (a mean) hides.
func reportLatency(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkAppendStep: one agent step (assistant message with a tool call and timings, its tool result of
// 2 KiB, the tool run), each a durable transaction.
func BenchmarkAppendStep(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	sess := newSession(b, s, Session{Title: "bench"})
	out := strings.Repeat("some tool output line\n", 100)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := Step{Messages: []Message{
			{Role: "assistant", Content: "Running the tests now.", Reasoning: "the user asked for tests",
				ToolCalls: []ToolCall{{ID: "c", Name: "shell", Arguments: []byte(`{"cmd":"go test ./..."}`)}},
				Timings:   &Timings{PromptTokens: 900, GeneratedTokens: 30, TokensPerSecond: 80}},
			{Role: "tool", ToolCallID: "c", ToolName: "shell", Content: out},
		}, ToolRuns: []ToolRun{{CallID: "c", Name: "shell", Result: out, Duration: time.Second}}}
		t0 := time.Now()
		if err := s.AppendStep(ctx, sess.ID, st); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// The search corpus is built once per test binary run (benchmark functions are called several times).
var benchData struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func cleanupBenchData() {
	if benchData.dir != "" {
		os.RemoveAll(benchData.dir)
	}
}

const benchMessages = 100_000

// benchWords is a vocabulary whose use follows a Zipf law, like real text: a few words are everywhere, most
// are rare, so the queries below cover common, medium and rare terms.
func benchWords() []string {
	words := strings.Fields(`the a to of and in is for that it with on this be are error build test run file
		function go module package import return value string int struct interface nil pointer slice map
		channel goroutine mutex context deadline timeout retry request response server client handler router
		sqlite database migration index query transaction commit rollback schema table column row cursor
		model token prompt cache draft speculative decode vision image engine profile swap llama gguf vram`)
	for i := len(words); i < 5000; i++ {
		words = append(words, fmt.Sprintf("term%04d", i))
	}
	return words
}

func searchCorpus(b *testing.B) string {
	benchData.once.Do(func() {
		benchData.dir, benchData.err = os.MkdirTemp("", "visor-memory-bench-")
		if benchData.err != nil {
			return
		}
		benchData.path = filepath.Join(benchData.dir, "search.db")
		ctx := context.Background()
		s, err := Open(ctx, benchData.path)
		if err != nil {
			benchData.err = err
			return
		}
		defer s.Close()
		t0 := time.Now()
		words := benchWords()
		rng := rand.New(rand.NewPCG(1, 2))
		zipf := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, uint64(len(words)-1))
		roles := []string{"user", "assistant", "assistant", "tool"}
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			benchData.err = err
			return
		}
		defer tx.Rollback()
		const perSession = 500
		base := time.Now().Add(-benchMessages * time.Minute)
		var sb strings.Builder
		for n := 0; n < benchMessages; n += perSession {
			sess, err := insertSession(ctx, tx, Session{Title: fmt.Sprintf("session %d", n/perSession), Agent: []string{"coder", "writer"}[n/perSession%2]})
			if err != nil {
				benchData.err = err
				return
			}
			st := Step{}
			for j := 0; j < perSession; j++ {
				sb.Reset()
				for k := 0; k < 10+rng.IntN(40); k++ {
					sb.WriteString(words[zipf.Uint64()])
					sb.WriteByte(' ')
				}
				st.Messages = append(st.Messages, Message{Role: roles[rng.IntN(len(roles))], Content: sb.String(),
					CreatedAt: base.Add(time.Duration(n+j) * time.Minute)})
			}
			if err := appendStepTx(ctx, tx, sess.ID, st); err != nil {
				benchData.err = err
				return
			}
		}
		benchData.err = tx.Commit()
		fmt.Fprintf(os.Stderr, "search corpus: %d messages in %s\n", benchMessages, time.Since(t0).Round(time.Millisecond))
	})
	if benchData.err != nil {
		b.Fatal(benchData.err)
	}
	return benchData.path
}

func BenchmarkSearch(b *testing.B) {
	path := searchCorpus(b)
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, bc := range []struct {
		name string
		q    Query
	}{
		{"common", Query{Text: "error"}},
		{"medium", Query{Text: "goroutine"}},
		{"rare", Query{Text: "term4321"}},
		{"two-terms", Query{Text: "sqlite migration"}},
		{"prefix", Query{Text: "term12*"}},
		{"common+agent+role", Query{Text: "error", Agent: "coder", Role: "assistant"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			hits := 0
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				h, err := s.Search(ctx, bc.q)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				hits = len(h)
			}
			b.StopTimer()
			reportLatency(b, lat)
			b.ReportMetric(float64(hits), "hits")
		})
	}
}
