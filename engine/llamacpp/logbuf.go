package llamacpp

import (
	"bufio"
	"io"
	"os"
	"strings"
	"sync"
)

// logRing keeps the last lines of the server's output for error reports, and copies every line to a file and an
// optional observer.
type logRing struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
	file  *os.File
	on    func(string)
}

func newLogRing(n int, file *os.File, on func(string)) *logRing {
	return &logRing{lines: make([]string, n), file: file, on: on}
}

func (r *logRing) add(line string) {
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	if r.file != nil {
		_, _ = r.file.WriteString(line + "\n")
	}
	on := r.on
	r.mu.Unlock()
	if on != nil {
		on(line)
	}
}

// Tail returns up to n of the latest lines, oldest first.
func (r *logRing) tail(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []string
	if r.full {
		all = append(all, r.lines[r.next:]...)
	}
	all = append(all, r.lines[:r.next]...)
	if n > 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return append([]string(nil), all...)
}

func (r *logRing) consume(rd io.Reader, done func()) {
	defer done()
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		r.add(sc.Text())
	}
}

// explain picks the log lines that say why the server failed, so the user sees the cause, not 200 lines of
// tensor loading.
func explain(lines []string) []string {
	keys := []string{"error", "failed", "out of memory", "cannot allocate", "unable to", "invalid argument",
		"unknown argument", "no such file", "not found", "exception", "abort", "segmentation", "terminate called",
		"no backends are loaded", "couldn't bind", "address already in use"}
	var out []string
	for _, l := range lines {
		ll := strings.ToLower(l)
		// Allocation failures are kept even when worded without the keys ("insufficient memory", "what():
		// std::bad_alloc"), because IsOOM decides the fallback from these lines.
		if oomLine(l) {
			out = append(out, strings.TrimSpace(l))
			continue
		}
		for _, k := range keys {
			if strings.Contains(ll, k) {
				out = append(out, strings.TrimSpace(l))
				break
			}
		}
	}
	if len(out) > 12 {
		out = out[len(out)-12:]
	}
	if len(out) == 0 && len(lines) > 0 {
		n := min(len(lines), 8)
		out = lines[len(lines)-n:]
	}
	return out
}
