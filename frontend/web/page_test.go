package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/frontend/web"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
)

// streamingAgent stands in for the model where a real one cannot go on CPU: it streams a long markdown answer
// in small tokens (1 to 11 bytes, as a tokenizer's are), as fast as the page takes them.
type streamingAgent struct {
	mu      sync.Mutex
	answer  string
	explain string // emitted before the answer, as the session's explanations are
}

func (a *streamingAgent) set(s string) { a.mu.Lock(); a.answer = s; a.mu.Unlock() }

func (a *streamingAgent) Run(_ context.Context, _ []agent.Message, user agent.Message, emit func(agent.Event)) agent.Finished {
	a.mu.Lock()
	s, explain := a.answer, a.explain
	a.mu.Unlock()
	if explain != "" {
		emit(agent.Explain{Step: 1, Text: explain})
	}
	for i, k := 0, 1; i < len(s); k = k%11 + 1 {
		j := min(i+k, len(s))
		emit(agent.Token{Text: s[i:j]})
		i = j
	}
	final := agent.Message{Role: "assistant", Content: s, Timings: &engine.Timings{PredictedPerSecond: 42, CacheN: 7, PromptN: 9}}
	emit(agent.StepFinished{Step: 1, Messages: []agent.Message{user, final}})
	return agent.Finished{Reason: "answer", Steps: 1, Final: final}
}

func (a *streamingAgent) Prefill(context.Context, []agent.Message, agent.Message) (*engine.Timings, error) {
	return nil, nil
}

// longMarkdown is about n bytes of the markdown models write: headings, paragraphs with emphasis, inline code
// and links, lists and fenced code. It returns the text and how many code blocks it holds.
func longMarkdown(n int) (string, int) {
	var b strings.Builder
	blocks := 0
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "## Part %d\n\nThe **screenshot** shows a `dialog` with [a link](https://example.com/%d) and *some* text that goes on for a while, as answers do.\nA second line of the same paragraph.\n\n", i, i)
		fmt.Fprintf(&b, "- first item %d\n- second item with `code`\n- third item\n\n", i)
		fmt.Fprintf(&b, "```go\nfunc part%d() int {\n\treturn %d // <b>not markup</b>\n}\n```\n\n", i, i)
		blocks++
	}
	return b.String(), blocks
}

// darkPhone is the page at 390 px wide with the system in dark mode.
func darkPhone() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2))(ctx, t); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})
}

func eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// shown sends msg from the page and waits until answer (the index of the assistant message) has its closing
// line and a frame has been painted with it. It returns the page's own time from the form's submit to that frame,
// so the time is the page's, the server's and the stream's, not the harness's. The wait runs in the page once a
// frame: chromedp's WaitVisible asks the browser for the element's layout every 5 ms, which on a 300 KB answer
// cost more than the page's own work (1.8 of 2.4 s, with Chrome's tracing).
func shown(tb testing.TB, ctx context.Context, msg string, answer int) time.Duration {
	tb.Helper()
	eval[bool](tb, ctx, `(document.addEventListener("submit", () => { window.sentAt = performance.now(); }, { capture: true, once: true }), true)`)
	steps(tb, ctx, chromedp.SendKeys("#text", msg), chromedp.Click("#send"))
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ms, err := chromedp.Run(sctx, chromedp.Evaluate[float64](fmt.Sprintf(`new Promise(done => {
		const check = () => {
			const a = document.querySelectorAll("div.msg.assistant")[%d];
			if (a && a.querySelector("div.meta")) requestAnimationFrame(() => setTimeout(() => done(performance.now() - window.sentAt)));
			else requestAnimationFrame(check);
		};
		check();
	})`, answer), chromedp.EvalAwaitPromise))
	if err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Text("body"))
		tb.Fatalf("answer %d not shown: %v\npage: %.2000s", answer, err, body)
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// TestLongAnswerStreamsInLinearTime streams a 30 KB and then a 300 KB markdown answer into the page in headless
// Chromium. The page renders each finished line once, so ten times the answer takes about ten times as long at
// most; re-rendering the whole answer on every token (as the page once did: 20 KB took 35 s, 300 KB never
// finished) makes it a hundred times. The bound is on the ratio of two runs in the same browser, not on a time,
// so a busy machine cannot fail it; both times are logged, and BenchmarkLongAnswerInBrowser reports them. The
// rendered answer is checked too: every code block is one <pre>, its "<b>" is text, and the streamed page equals
// the same text rendered at once.
func TestLongAnswerStreamsInLinearTime(t *testing.T) {
	ctx, a := streamingPage(t)
	tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	took := map[int]time.Duration{}
	for i, size := range []int{30 << 10, 300 << 10} {
		answer, blocks := longMarkdown(size)
		a.set(answer)
		took[size] = shown(t, tctx, fmt.Sprintf("answer %d", i), i)
		sel := fmt.Sprintf(`document.querySelectorAll("div.msg.assistant")[%d]`, i)
		if got := eval[int](t, tctx, sel+`.querySelectorAll("pre").length`); got != blocks {
			t.Errorf("%d KB: %d code blocks rendered, want %d", size>>10, got, blocks)
		}
		if got := eval[int](t, tctx, sel+`.querySelectorAll("b").length`); got != 0 {
			t.Errorf("%d KB: the model's <b> became markup %d times", size>>10, got)
		}
		same := eval[bool](t, tctx, `(() => { const el = `+sel+`; const d = document.createElement("div");
			const m = new Markdown(d); m.push(`+jsString(answer)+`); m.finish();
			const streamed = el.cloneNode(true); streamed.querySelector("div.meta").remove();
			return streamed.innerHTML === d.innerHTML; })()`)
		if !same {
			t.Errorf("%d KB: the streamed answer renders differently from the same text rendered at once", size>>10)
		}
	}
	// The renderer alone, without the server and the event stream: the 300 KB answer in 4-byte tokens, drawn
	// every 64 tokens (a frame's worth at a fast model's pace).
	answer, _ := longMarkdown(300 << 10)
	ms := eval[float64](t, tctx, `(() => { const s = `+jsString(answer)+`; const d = document.createElement("div");
		document.body.appendChild(d); const m = new Markdown(d); const t0 = performance.now();
		for (let i = 0, n = 0; i < s.length; i += 4, n++) { m.src += s.slice(i, i + 4); if (n % 64 === 63) m.render(false); }
		m.finish(); const ms = performance.now() - t0; d.remove(); return ms; })()`)
	t.Logf("the renderer alone: 300 KB in %.0f ms", ms)
	ratio := float64(took[300<<10]) / float64(took[30<<10])
	t.Logf("sent to painted: 30 KB in %s, 300 KB in %s (ratio %.1f; linear is 10 at most, per-token re-rendering 100)",
		took[30<<10].Round(time.Millisecond), took[300<<10].Round(time.Millisecond), ratio)
	if ratio > 30 {
		t.Fatalf("10× the answer took %.0f× as long (30 KB %s, 300 KB %s): rendering is not linear in the answer", ratio,
			took[30<<10], took[300<<10])
	}
}

// BenchmarkLongAnswerInBrowser reports how long the page takes from Send to the painted end of a 300 KB
// markdown answer (the acceptance bound is 5 s), and of a 30 KB one measured in the same run as the baseline:
//
//	nice -n 10 go test ./frontend/web/ -run '^$' -bench LongAnswerInBrowser -benchtime 5x
//
// Each answer goes to a new chat, so every one starts from an empty page.
func BenchmarkLongAnswerInBrowser(b *testing.B) {
	ctx, a := streamingPage(b)
	small, _ := longMarkdown(30 << 10)
	large, _ := longMarkdown(300 << 10)
	var tookSmall, tookLarge time.Duration
	n := 0
	for b.Loop() {
		for _, s := range []string{small, large} {
			a.set(s)
			steps(b, ctx, chromedp.Click("#new"))
			d := shown(b, ctx, fmt.Sprintf("answer %d", n), 0)
			if len(s) == len(small) {
				tookSmall += d
			} else {
				tookLarge += d
			}
		}
		n++
	}
	b.ReportMetric(float64(tookLarge.Milliseconds())/float64(n), "ms/300KB")
	b.ReportMetric(float64(tookSmall.Milliseconds())/float64(n), "ms/30KB")
	b.ReportMetric(float64(tookLarge)/float64(tookSmall), "ratio")
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "$", `\$`)
	return "`" + r.Replace(s) + "`"
}

// TestModelCannotForgeMarkup: what the model writes is shown as text, whatever it imitates — the renderer's old
// code-block placeholder (NUL, index, NUL), HTML, or a javascript: link.
func TestModelCannotForgeMarkup(t *testing.T) {
	ctx, a := streamingPage(t)
	a.set("```\nSECRET\n```\n\nplain \x000\x00 and \\u0000 0 \\u0000 and <img src=x onerror=alert(1)> and [x](javascript:alert(1)) `\x000\x00`")
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	steps(t, tctx, chromedp.SendKeys("#text", "go"), chromedp.Click("#send"), chromedp.WaitVisible("div.meta"))
	if n := eval[int](t, tctx, `document.querySelectorAll("div.msg.assistant pre").length`); n != 1 {
		t.Errorf("%d code blocks, want the one the model wrote", n)
	}
	p := eval[string](t, tctx, `document.querySelector("div.msg.assistant p").textContent`)
	// (The NULs themselves the browser's HTML parser drops from text; what matters is that they swap nothing in.)
	if strings.Contains(p, "SECRET") || !strings.Contains(p, "<img src=x") || !strings.Contains(p, `\u0000 0 \u0000`) {
		t.Errorf("paragraph shows %q: want the model's text as text, no code block swapped in", p)
	}
	if n := eval[int](t, tctx, `document.querySelectorAll("div.msg.assistant img, div.msg.assistant a").length`); n != 0 {
		t.Errorf("%d elements made from the model's markup", n)
	}
	// A line of 20,000 openers is shown whole as text (the rules' time is quadratic in such a line); a short line
	// keeps its emphasis.
	got := eval[[]int](t, tctx, `["**bold** x", "**bold** " + "[".repeat(20000)].map(s => {
		const d = document.createElement("div"); const m = new Markdown(d); m.push(s); m.finish();
		return d.querySelectorAll("strong").length * 1000000 + d.textContent.length; })`)
	if len(got) != 2 || got[0] != 1000000+len("bold x") || got[1] != len("**bold** ")+20000 {
		t.Errorf("strong elements ×10⁶ + text length: %v, want [%d %d]", got, 1000000+len("bold x"), len("**bold** ")+20000)
	}
}

// TestPageOnAPhoneInDarkMode uses the page at 390 px in dark mode with a real SQLite store: the chat list is
// folded away behind the Chats button, the colours follow the system, two chats are made, one is renamed and the
// other deleted from the list, a search finds a chat by a word of its messages, and after a reload the
// explanations and the line under the answer are shown again. A screenshot is left in VISOR_SCREENSHOT_DIR
// when it is set.
func TestPageOnAPhoneInDarkMode(t *testing.T) {
	ctx := browser(t)
	store, err := memory.Open(context.Background(), filepath.Join(t.TempDir(), "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a := &streamingAgent{}
	svc := fakeService(t, a, func(c *session.Config) { c.Store = store })
	hs := serveChat(t, web.Config{Sessions: svc})
	defer hs.Close()
	if err := chromedp.Do(ctx, darkPhone()); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	if w := eval[float64](t, tctx, `document.documentElement.clientWidth`); w != 390 {
		t.Fatalf("viewport %v px wide, want 390", w)
	}
	if bg := eval[string](t, tctx, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(21, 24, 29)" {
		t.Errorf("body background %s in dark mode, want the dark one", bg)
	}
	// Folded: the list is off screen and the chat takes the whole width.
	if r := eval[float64](t, tctx, `document.querySelector("nav").getBoundingClientRect().right`); r > 0 {
		t.Errorf("the chat list reaches %v px into a 390 px screen before it is opened", r)
	}
	if w := eval[float64](t, tctx, `document.querySelector("#chat").getBoundingClientRect().width`); w < 389 {
		t.Errorf("the chat is %v px wide on a 390 px screen", w)
	}
	if sw := eval[float64](t, tctx, `document.documentElement.scrollWidth`); sw > 390 {
		t.Errorf("the page scrolls sideways: %v px wide", sw)
	}

	a.set("The **dialog** says the disk is full.\n\n- free space\n- retry")
	a.mu.Lock()
	a.explain = "step 1: the request encoded its 1 new image(s) (16 tokens) itself, on the critical path: 3ms of its 9ms prompt evaluation"
	a.mu.Unlock()
	steps(t, tctx, chromedp.SendKeys("#text", "what does the dialog say?"), chromedp.Click("#send"), chromedp.WaitVisible("div.meta"))
	a.set("Nothing else.")
	a.mu.Lock()
	a.explain = ""
	a.mu.Unlock()
	navRight := `document.querySelector("nav").getBoundingClientRect().right`
	// openList opens the chat list and waits for its slide to end, so that clicks land where the items rest: the
	// slide is over when the nav is out and its transition has ended (getAnimations flushes the style, so a slide
	// just started is listed). Two equal positions 50 ms apart were not enough: a browser starved on a busy
	// machine paints no frame for longer than that mid-slide.
	settled := `(() => { const n = document.querySelector("nav"); return n.getAnimations().length === 0 && n.getBoundingClientRect().right > 0 })()`
	openList := func() {
		t.Helper()
		steps(t, tctx, chromedp.Click("button#menu"))
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if eval[bool](t, tctx, settled) {
				return
			}
		}
		t.Fatal("the chat list did not open")
	}
	openList()
	steps(t, tctx, chromedp.Click("button#new"), chromedp.WaitNotPresent("div.meta"),
		chromedp.SendKeys("#text", "anything else about zebras?"), chromedp.Click("#send"), chromedp.WaitVisible("div.meta"))
	ss, err := store.ListSessions(context.Background(), memory.SessionFilter{})
	if err != nil || len(ss) != 2 {
		t.Fatalf("stored sessions %+v %v, want two", ss, err)
	}
	var first, second string
	for _, s := range ss {
		if strings.HasPrefix(s.Title, "what does") {
			first = s.ID
		} else {
			second = s.ID
		}
	}
	shot := func(name string) {
		dir := os.Getenv("VISOR_SCREENSHOT_DIR")
		if dir == "" {
			return
		}
		b, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			t.Errorf("screenshot: %v", err)
		}
	}
	shot("web-390-dark-chat.png")
	item := func(id string) string { return `nav div.item[data-session="` + id + `"]` }

	// Open the list: it slides over the chat, inside the screen.
	openList()
	steps(t, tctx, chromedp.WaitVisible(item(first)+" a"))
	if r := eval[float64](t, tctx, navRight); r < 200 || r > 390 {
		t.Errorf("the opened chat list ends at %v px on a 390 px screen", r)
	}
	shot("web-390-dark-list.png")

	// Rename the first chat.
	steps(t, tctx,
		chromedp.Click(item(first)+" button.rename"),
		chromedp.WaitVisible(item(first)+" input.title-edit"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+item(first)+` input.title-edit').value = ""`),
		chromedp.SendKeys(item(first)+" input.title-edit", "Disk full dialog\r"),
		chromedp.WaitVisible(item(first)+" a"),
	)
	if got := eval[string](t, tctx, `document.querySelector('`+item(first)+` a').firstChild.textContent`); got != "Disk full dialog" {
		t.Errorf("renamed chat is listed as %q", got)
	}
	if st, err := store.Session(context.Background(), first); err != nil || st.Title != "Disk full dialog" {
		t.Errorf("stored title %q %v", st.Title, err)
	}

	// Delete the second (the open one): asked first, then gone from the list, the store and the page.
	steps(t, tctx,
		chromedp.Click(item(second)+" button.delete"),
		chromedp.WaitVisible(item(second)+" button.yes"),
		chromedp.Click(item(second)+" button.yes"),
		chromedp.WaitNotPresent(item(second)),
	)
	if _, err := store.Session(context.Background(), second); err == nil {
		t.Error("the deleted chat is still stored")
	}
	if n := eval[int](t, tctx, `document.querySelectorAll("div.msg").length`); n != 0 {
		t.Errorf("the deleted chat's %d messages are still on the page", n)
	}

	// Search by a word of the first chat's answer.
	steps(t, tctx, chromedp.SendKeys("input#search", "disk"), chromedp.WaitVisible(item(first)+" a small"))
	if snip := eval[string](t, tctx, `document.querySelector('`+item(first)+` a small').textContent`); snip == "" {
		t.Error("the search hit shows nothing of where it matched")
	}

	// Reload the first chat: its line under the answer comes back.
	steps(t, tctx, chromedp.Click(item(first)+" a"), chromedp.WaitVisible("div.meta"))
	if m := eval[string](t, tctx, `document.querySelector("div.meta").textContent`); m != "1 step(s), 42 tokens/s, 7 prompt tokens from cache" {
		t.Errorf("after a reload the answer's line says %q", m)
	}
	if n := eval[int](t, tctx, `document.querySelectorAll("div.msg.assistant li").length`); n != 2 {
		t.Errorf("the reloaded answer shows %d list items, want 2", n)
	}
	ex := eval[string](t, tctx, `[...document.querySelectorAll("div.msg.tool")].map(d => d.textContent).join("|")`)
	if !strings.HasPrefix(ex, "explainstep 1: the request encoded its 1 new image(s)") {
		t.Errorf("after a reload the explanations read %q, want the turn's one, labelled", ex)
	}
	// The page's fonts have every character of its own labels: no emoji or symbol a system font may lack.
	if odd := eval[string](t, tctx, `[...document.body.innerText].filter(c => c.codePointAt(0) > 0x2000 && !"→←…·–".includes(c)).join("")`); odd != "" {
		t.Errorf("the page shows %q", odd)
	}
}

// streamingPage is the chat page in the browser, served over a session service whose agent streams what it is set
// to answer.
func streamingPage(tb testing.TB) (context.Context, *streamingAgent) {
	ctx := browser(tb)
	a := &streamingAgent{}
	hs := serveChat(tb, web.Config{Sessions: fakeService(tb, a, nil)})
	tb.Cleanup(hs.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		tb.Fatal(err)
	}
	return ctx, a
}
