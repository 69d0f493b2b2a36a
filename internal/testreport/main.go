// Command testreport reads `go test -json` on stdin and writes what a person watching a long test run needs: a line
// per finished package, a heartbeat naming what still runs whenever nothing else was said for a while (a cold build
// of the test binaries is minutes of silence otherwise), the output of every failure, every skip with its reason,
// and always a closing summary line, even when a build fails. It exits 1 when anything failed.
//
// Usage: go test -json ./... | go run ./internal/testreport [-heartbeat 20s]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func main() {
	heartbeat := flag.Duration("heartbeat", 15*time.Second, "say what still runs after this long without other output")
	flag.Parse()
	events := make(chan event)
	go func() {
		defer close(events)
		readEvents(os.Stdin, events, os.Stderr)
	}()
	r := newReport(time.Now())
	// A one-second tick keeps each heartbeat within a second of its due time: a tick of a quarter heartbeat let the
	// silence reach 25 s on a loaded machine, near the 30 s at which a newcomer takes the run for hung.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastSaid := time.Now()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				out := r.summary(time.Now())
				fmt.Print(out)
				if r.failed() {
					os.Exit(1)
				}
				return
			}
			if s := r.add(ev); s != "" {
				fmt.Print(s)
				lastSaid = time.Now()
			}
		case now := <-tick.C:
			if now.Sub(lastSaid) >= *heartbeat {
				fmt.Print(r.heartbeatLine(now))
				lastSaid = now
			}
		}
	}
}

// event is one line of `go test -json` (cmd/test2json's TestEvent, with the build events of Go 1.24+).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// readEvents decodes the stream; a line that is not JSON (go test's own messages before a package builds) is
// passed through to w rather than lost.
func readEvents(in io.Reader, out chan<- event, w io.Writer) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		out <- ev
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(w, "testreport: reading go test's output: %v\n", err)
	}
}

type testKey struct{ pkg, test string }

type report struct {
	start                  time.Time
	passed, failedN, skipN int
	pkgFailed              []string
	pkgOnlyFailed          int                         // failed packages with no failed test
	buildOut               map[string]*strings.Builder // import path → compiler output
	output                 map[testKey]*strings.Builder
	running                map[testKey]time.Time // tests and packages (test "") started, not finished
	pkgCounts              map[string]*[3]int
	failures               []string // formatted output of failed tests
	skips                  []string // "pkg TestX: reason"
}

func newReport(start time.Time) *report {
	return &report{start: start, buildOut: map[string]*strings.Builder{}, output: map[testKey]*strings.Builder{},
		running: map[testKey]time.Time{}, pkgCounts: map[string]*[3]int{}}
}

func (r *report) failed() bool { return r.failedN > 0 || len(r.pkgFailed) > 0 }

func short(pkg string) string {
	if i := strings.Index(pkg, "/visor/"); i >= 0 {
		return pkg[i+len("/visor/"):]
	}
	return pkg
}

// add takes one event and returns what to print now.
func (r *report) add(ev event) string {
	k := testKey{ev.Package, ev.Test}
	switch ev.Action {
	case "build-output":
		b := r.buildOut[ev.ImportPath]
		if b == nil {
			b = &strings.Builder{}
			r.buildOut[ev.ImportPath] = b
		}
		b.WriteString(ev.Output)
	case "start":
		r.running[k] = ev.Time
	case "run":
		r.running[k] = ev.Time
	case "output":
		b := r.output[k]
		if b == nil {
			b = &strings.Builder{}
			r.output[k] = b
		}
		if b.Len() < 1<<20 {
			b.WriteString(ev.Output)
		}
	case "pass", "fail", "skip":
		delete(r.running, k)
		if ev.Test == "" {
			return r.finishPackage(ev)
		}
		c := r.counts(ev.Package)
		out := r.output[k]
		delete(r.output, k)
		switch ev.Action {
		case "pass":
			r.passed++
			c[0]++
		case "fail":
			r.failedN++
			c[1]++
			text := ""
			if out != nil {
				text = out.String()
			}
			r.failures = append(r.failures, fmt.Sprintf("--- FAIL %s %s (%.1fs)\n%s", short(ev.Package), ev.Test, ev.Elapsed, text))
			return fmt.Sprintf("FAIL %s %s (%.1fs)\n%s", short(ev.Package), ev.Test, ev.Elapsed, indent(text))
		case "skip":
			r.skipN++
			c[2]++
			r.skips = append(r.skips, fmt.Sprintf("%s %s: %s", short(ev.Package), ev.Test, skipReason(out)))
		}
	}
	return ""
}

func (r *report) counts(pkg string) *[3]int {
	c := r.pkgCounts[pkg]
	if c == nil {
		c = &[3]int{}
		r.pkgCounts[pkg] = c
	}
	return c
}

func (r *report) finishPackage(ev event) string {
	c := r.counts(ev.Package)
	out := r.output[testKey{ev.Package, ""}]
	delete(r.output, testKey{ev.Package, ""})
	switch {
	case ev.Action == "fail":
		r.pkgFailed = append(r.pkgFailed, short(ev.Package))
		if c[1] == 0 {
			r.pkgOnlyFailed++
		}
		msg := ""
		if ev.FailedBuild != "" {
			if b := r.buildOut[ev.FailedBuild]; b != nil {
				msg = b.String()
			}
			return fmt.Sprintf("FAIL %s: build failed (%s)\n%s", short(ev.Package), short(ev.FailedBuild), indent(msg))
		}
		if c[1] == 0 && out != nil {
			// A package that failed outside any test (a panic in init, a timeout, TestMain) says why only here.
			msg = out.String()
			r.failures = append(r.failures, fmt.Sprintf("--- FAIL %s (package)\n%s", short(ev.Package), msg))
		}
		return fmt.Sprintf("FAIL %s %.1fs (%d passed, %d failed, %d skipped)\n%s", short(ev.Package), ev.Elapsed, c[0], c[1], c[2], indent(msg))
	case c[0]+c[1]+c[2] == 0:
		return "" // no test files: not news
	default:
		return fmt.Sprintf("ok   %s %.1fs (%d passed, %d skipped)\n", short(ev.Package), ev.Elapsed, c[0], c[2])
	}
}

// running is the heartbeat: the longest-running tests first, so a stuck one is named.
func (r *report) heartbeatLine(now time.Time) string {
	if len(r.running) == 0 {
		return fmt.Sprintf("… %s: building test binaries\n", elapsed(now.Sub(r.start)))
	}
	type item struct {
		name string
		d    time.Duration
	}
	var tests []item
	pkgs := 0
	for k, t := range r.running {
		if k.test == "" {
			pkgs++
			continue
		}
		if strings.Contains(k.test, "/") {
			continue
		}
		tests = append(tests, item{short(k.pkg) + " " + k.test, now.Sub(t)})
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].d > tests[j].d })
	var names []string
	for i, it := range tests {
		if i == 3 {
			names = append(names, fmt.Sprintf("%d more", len(tests)-3))
			break
		}
		names = append(names, fmt.Sprintf("%s (%s)", it.name, elapsed(it.d)))
	}
	if len(names) == 0 {
		names = append(names, "building")
	}
	return fmt.Sprintf("… %s: %d passed so far; %d packages running: %s\n", elapsed(now.Sub(r.start)), r.passed, pkgs, strings.Join(names, ", "))
}

func (r *report) summary(now time.Time) string {
	var b strings.Builder
	if len(r.skips) > 0 {
		fmt.Fprintf(&b, "\nskipped (%d):\n", len(r.skips))
		for _, s := range r.skips {
			fmt.Fprintf(&b, "  %s\n", s)
		}
	}
	if len(r.failures) > 0 {
		fmt.Fprintf(&b, "\nfailures (%d):\n", len(r.failures))
		for _, f := range r.failures {
			b.WriteString(indent(f))
		}
	}
	if len(r.pkgFailed) > 0 {
		fmt.Fprintf(&b, "\npackages that failed: %s\n", strings.Join(r.pkgFailed, " "))
	}
	fmt.Fprintf(&b, "\ntests finished in %s\n", elapsed(now.Sub(r.start)))
	// A package that failed without a failing test (a build error, a timeout) counts as one failure, so the
	// closing line never reads "0 failed" on a failed run.
	fmt.Fprintf(&b, "tests: %d passed, %d failed, %d skipped\n", r.passed, r.failedN+r.pkgOnlyFailed, r.skipN)
	return b.String()
}

// skipReason is the last message a skipped test logged before its "--- SKIP" line.
func skipReason(out *strings.Builder) string {
	if out == nil {
		return "(no reason given)"
	}
	var reason string
	for _, l := range strings.Split(out.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		reason = l
	}
	if reason == "" {
		return "(no reason given)"
	}
	if _, after, ok := strings.Cut(reason, ".go:"); ok {
		if _, msg, ok := strings.Cut(after, ": "); ok {
			reason = msg
		}
	}
	return reason
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
