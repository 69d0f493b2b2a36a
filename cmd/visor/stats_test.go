package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// TestStatsAndTraceOfAChat attaches a screenshot in `visor chat --explain` (prefilled while the question is
// typed; the chat says why and what it took), then reads the session back with `visor stats`: the prefill shows,
// split into the part hidden and the part the question waited for (here it is sent right after the attachment),
// and --trace gives a trace that `visor simulate` replays. The engine's measured costs are in the store (`visor
// stats --costs`), grow with a second process (`visor ask --explain` with an image sent along, which says the
// request encoded it itself), and `visor simulate --costs stored` replays with them.
func TestStatsAndTraceOfAChat(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The same 16 image tokens from a wider encoder: an encode of tens of milliseconds, so that what the session
	// measures of it stands clear of the text's timing noise on a loaded machine (the default encodes in ~1 ms).
	if err := testmodel.WriteProjectorFile(proj, testmodel.ProjectorOptions{EmbeddingLength: 384, Blocks: 6, Heads: 6}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "v.db")
	d := startFrontEnd(t, "chat", chat, proj, db, "--explain")
	if a, err := d.send(t, "what is this?", testkit.PNG(t, 16, 16)); err != nil || a != "Hi!" {
		t.Fatalf("%q %v", a, err)
	}
	if a, err := d.send(t, "and now?", nil); err != nil || a != "Hi!" {
		t.Fatalf("%q %v", a, err)
	}
	d.close(t)
	explained := regexp.MustCompile(`explain: prefill 1 image\(s\) ahead \(attached [\d.]+m?s before send; 1 known image\(s\), 16 tokens, ` +
		`before the request: encode now \([^)]*\), so the request finds them encoded\) — done in [\d.]+[mµ]?s, (hidden|[\d.]+[mµ]?s of it exposed)`)
	if log := d.stderr(); !explained.MatchString(log) ||
		!strings.Contains(log, "explain: step 1: the request found its 1 image(s) in the cache") {
		t.Fatalf("chat --explain did not say what was prefilled ahead, why and what it took:\n%s", log)
	}
	costs := func() string {
		t.Helper()
		out, errOut, err := runSafely(t, []string{"stats", "--costs", "--db", db}, strings.NewReader(""))
		if err != nil {
			t.Fatalf("stats --costs: %v\n%s", err, errOut)
		}
		return out
	}
	encodeSamples := regexp.MustCompile(`encode_cpu_per_token\s+[\d.]+ ms per image token\s+(\d+)`)
	before := costs()
	m := encodeSamples.FindStringSubmatch(before)
	if !strings.Contains(before, "engine "+filepath.Base(chat)+" + "+filepath.Base(proj)+" on CPU") || m == nil || m[1] == "0" ||
		!regexp.MustCompile(`encode_gpu_per_token\s+[\d.]+ ms per image token\s+0 \(default\)`).MatchString(before) {
		t.Fatalf("stats --costs after the chat (one prefilled image, measured on the CPU):\n%s", before)
	}
	out, errOut, err := runSafely(t, []string{"stats", "--db", db}, strings.NewReader(""))
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`[\d.]+m?s \([\d.]+m?s hidden, [\d.]+m?s exposed\)|[\d.]+m?s \(hidden\)`).MatchString(out) ||
		!strings.Contains(out, "tokens/s") || strings.Count(out, "\n") < 4 {
		t.Fatalf("stats:\n%s", out)
	}
	out, _, err = runSafely(t, []string{"stats", "--db", db, "--trace"}, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := swap.ParseTrace([]byte(out))
	if err != nil {
		t.Fatalf("the exported trace does not parse: %v\n%s", err, out)
	}
	if len(tr.Steps) != 2 || len(tr.Steps[0].Images) != 1 || tr.Steps[0].Images[0].KnownAhead <= 0 || len(tr.Steps[1].Images) != 0 {
		t.Fatalf("trace %+v", tr)
	}
	file := filepath.Join(dir, "trace.json")
	if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, err := runSafely(t, []string{"simulate", "--trace", file}, strings.NewReader("")); err != nil || !strings.Contains(out, "reactive") {
		t.Fatalf("simulate the exported trace: %v\n%s\n%s", err, out, errOut)
	}
	// A second process loads the stored model and adds to it: its image came with the question.
	_, errOut, err = runSafely(t, []string{"ask", "and this?", "--model", chat, "--mmproj", proj, "--plan", "off", "--db", db,
		"--explain", "--image", testkit.WritePNG(t, filepath.Join(dir, "shot-24x16.png"), 24, 16, 0)}, strings.NewReader(""))
	if err != nil {
		t.Fatalf("ask: %v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`explain: step 1: the request encoded its 1 new image\(s\) \(16 tokens\) itself, on the critical path`).MatchString(errOut) {
		t.Fatalf("ask --explain did not say the request encoded its image:\n%s", errOut)
	}
	after := costs()
	if m2 := encodeSamples.FindStringSubmatch(after); m2 == nil || atoi(t, m2[1]) != atoi(t, m[1])+1 {
		t.Fatalf("the second process did not add its encode to the stored model:\nbefore\n%s\nafter\n%s", before, after)
	}
	out, errOut, err = runSafely(t, []string{"simulate", "--trace", file, "--costs", "stored", "--db", db}, strings.NewReader(""))
	if err != nil || !strings.Contains(out, "reactive") {
		t.Fatalf("simulate --costs stored: %v\n%s\n%s", err, out, errOut)
	}
	if _, errOut, err := runSafely(t, []string{"simulate", "--trace", file, "--costs", "stored:nope", "--db", db}, strings.NewReader("")); err == nil ||
		!strings.Contains(err.Error(), `no stored engine's key contains "nope"`) {
		t.Fatalf("simulate --costs stored:nope: %v\n%s", err, errOut)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStoredCostsThatCannotBeRead: a stored model that no longer validates (here: no profiles) is named as
// unreadable by `visor stats --costs`, beside the readable ones, and `visor simulate --costs stored:KEY` refuses it
// with the key and the reason; an empty database says how costs get there.
func TestStoredCostsThatCannotBeRead(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	// A read command creates no database (issue 24): the empty one is made as a first ask would make it.
	store, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := runSafely(t, []string{"stats", "--costs", "--db", db}, strings.NewReader(""))
	if err != nil || !strings.Contains(out, "no measured engine costs yet") {
		t.Fatalf("empty database: %v\n%s", err, out)
	}
	good, _ := json.Marshal(swap.SeedCosts())
	if err := store.SaveEngineCosts(context.Background(), "good|||", good); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveEngineCosts(context.Background(), "broken|||", []byte(`{"profiles":[]}`)); err != nil {
		t.Fatal(err)
	}
	store.Close()
	out, errOut, err := runSafely(t, []string{"stats", "--costs", "--db", db}, strings.NewReader(""))
	if err != nil || !strings.Contains(out, `engine broken|||: unreadable (stored costs of engine "broken|||": `) ||
		!strings.Contains(out, "profiles: empty") || !strings.Contains(out, "tokens_per_second.mtp-swap") {
		t.Fatalf("stats --costs: %v\n%s%s", err, out, errOut)
	}
	trace := filepath.Join("..", "..", "engine", "swap", "testdata", "traces", "chat-screenshots.json")
	_, _, err = runSafely(t, []string{"simulate", "--trace", trace, "--costs", "stored:broken", "--db", db}, strings.NewReader(""))
	if err == nil || !strings.Contains(err.Error(), `--costs stored:broken: stored costs of engine "broken|||"`) {
		t.Fatalf("simulate with the broken model: %v", err)
	}
}
