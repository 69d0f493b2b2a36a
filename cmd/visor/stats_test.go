package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/enginetest"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/engine/testmodel"
	"github.com/visorhq/visor/internal/testkit"
)

// TestStatsAndTraceOfAChat attaches a screenshot in `visor chat` (prefilled while the question is typed), then
// reads the session back with `visor stats`: the prefill shows, split into the part hidden and the part the
// question waited for (here it is sent right after the attachment), and --trace gives a trace that `visor
// simulate` replays.
func TestStatsAndTraceOfAChat(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	chat, proj, err := testmodel.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "v.db")
	d := startFrontEnd(t, "chat", chat, proj, db)
	if a, err := d.send(t, "what is this?", testkit.PNG(t, 16, 16)); err != nil || a != "Hi!" {
		t.Fatalf("%q %v", a, err)
	}
	if a, err := d.send(t, "and now?", nil); err != nil || a != "Hi!" {
		t.Fatalf("%q %v", a, err)
	}
	d.close(t)
	out, errOut, err := runSafely(t, []string{"stats", "--db", db}, strings.NewReader(""))
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !regexp.MustCompile(`\d+ms \((\d+ms|0s) hidden, (\d+ms|0s) exposed\)|\d+ms \(hidden\)`).MatchString(out) ||
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
}
