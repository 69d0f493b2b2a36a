package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/internal/testmodel"
	"github.com/visorhq/visor/memory"
)

// TestRunStepsPrefillsTheNextStepsImages runs an agent file of three steps, the second and third with a
// screenshot each, on the hybrid model (whose cache cannot be cut back): each next step's image is evaluated as
// soon as the step before has answered, so that step's request evaluates only its own text and the image comes
// from the cache; --explain says so. A bad image in a step is refused at load, naming the file, the line, the step and the fix,
// before any model loads.
func TestRunStepsPrefillsTheNextStepsImages(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	if _, _, err := testmodel.HybridFiles(dir, testmodel.ProjectorOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.WritePNG(t, filepath.Join(dir, "a.png"), 16, 16, 1)
	testkit.WritePNG(t, filepath.Join(dir, "b.png"), 16, 16, 2)
	yml := filepath.Join(dir, "looker.yaml")
	src := "name: looker\nmodel:\n  path: " + testmodel.HybridFileName + "\n  mmproj: " + testmodel.ProjectorFileName +
		"\n  plan: off\nsteps:\n  - prompt: hello\n  - prompt: What is on screen?\n    images: [a.png]\n" +
		"  - prompt: And now?\n    images: [b.png]\n"
	if err := os.WriteFile(yml, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "v.db")
	out, errOut, err := visor(t, "run", yml, "--db", db, "--explain")
	if err != nil || out != "Hi!\nHi!\nHi!\n" || !strings.Contains(errOut, "step 3/3: And now?") {
		t.Fatalf("%v\nstdout %q\nstderr %s", err, out, errOut)
	}
	// --explain says, for steps 2 and 3, that the step's image was prefilled ahead, and that the request found it
	// in the cache.
	if n, m := strings.Count(errOut, "explain: prefill 1 image(s) ahead ("), strings.Count(errOut, "the request found its 1 image(s) in the cache"); n != 2 || m != 2 {
		t.Errorf("run --explain: %d prefills ahead and %d cached images explained, want 2 and 2:\n%s", n, m, errOut)
	}
	st, err := memory.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ss, err := st.ListSessions(context.Background(), memory.SessionFilter{Agent: "looker"})
	if err != nil || len(ss) != 1 {
		t.Fatalf("sessions %+v %v", ss, err)
	}
	msgs, err := st.Messages(context.Background(), ss[0].ID)
	if err != nil || len(msgs) != 6 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	for step, text := range map[int]string{2: "What is on screen?", 3: "And now?"} {
		user, answer := msgs[2*step-2], msgs[2*step-1]
		if user.Content != text || len(user.Images) != 1 || answer.Timings == nil {
			t.Fatalf("step %d: %+v / %+v", step, user, answer)
		}
		tm := answer.Timings
		// The prefix evaluated ahead ends on the line after the image; the request adds the question, its end
		// of turn and the generation prompt.
		want := testmodel.TokenCount(text+"<|im_end|>\n<|im_start|>assistant\n") + 8
		t.Logf("step %d: prompt_n %d, cache_n %d (new text + slack %d)", step, tm.PromptTokens, tm.CachedTokens, want)
		if tm.PromptTokens > want || tm.CachedTokens < 16 {
			t.Errorf("step %d's request evaluated %d tokens (cached %d), want ≤ %d with its image from the cache: it was not prefilled",
				step, tm.PromptTokens, tm.CachedTokens, want)
		}
	}
	stats, _, err := visor(t, "stats", ss[0].ID, "--db", db)
	t.Logf("visor stats:\n%s", stats)
	if err != nil || strings.Count(stats, "hidden") != 2 {
		t.Errorf("visor stats does not show the two prefills: %v\n%s", err, stats)
	}

	bad := filepath.Join(dir, "cut.png")
	whole, _ := os.ReadFile(filepath.Join(dir, "a.png"))
	if err := os.WriteFile(bad, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	badYML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYML, []byte(strings.Replace(src, "[b.png]", "[cut.png]", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = visor(t, "run", badYML, "--db", db)
	if err == nil || !strings.Contains(err.Error(), badYML+":11:14: step 3: image "+bad+": image is corrupt or truncated") ||
		!strings.Contains(err.Error(), "re-export") || strings.Contains(errOut, "load") {
		t.Fatalf("a truncated step image: %v\nstderr %s", err, errOut)
	}
}
