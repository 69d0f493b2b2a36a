package launch

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/visorhq/visor/internal/termtext"
	"github.com/visorhq/visor/internal/textcut"
)

// progress shows a wait that lasts over a second on stderr: in place on a terminal, one line per new phase
// otherwise (so logs stay short). Phases come from the waited-on thing itself (llama-server's log lines).
type progress struct {
	w     io.Writer
	tty   bool
	what  string
	start time.Time

	mu    sync.Mutex
	phase string
	shown string
	stop  chan struct{}
	done  chan struct{}
}

func startProgress(w io.Writer, what string) *progress {
	p := &progress{w: w, tty: termtext.IsTerminal(w), what: what, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p
}

// Phase sets what the wait is doing now.
func (p *progress) Phase(s string) {
	p.mu.Lock()
	p.phase = s
	p.mu.Unlock()
}

func (p *progress) loop() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			if time.Since(p.start) < time.Second {
				continue
			}
			p.draw()
		}
	}
}

func (p *progress) draw() {
	p.mu.Lock()
	phase := p.phase
	p.mu.Unlock()
	el := time.Since(p.start).Truncate(time.Second)
	switch {
	case p.tty:
		line := fmt.Sprintf("%s … %s", p.what, el)
		if phase != "" {
			line += " — " + phase
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s", textcut.Line(line, 120))
		p.shown = line
	case phase != p.shown || p.shown == "":
		fmt.Fprintf(p.w, "%s … %s %s\n", p.what, el, phase)
		p.shown = phase
		if p.shown == "" {
			p.shown = " "
		}
	}
}

// Done ends the display, leaving a line saying how long the wait took when it was shown at all.
func (p *progress) Done(result string) {
	close(p.stop)
	<-p.done
	if p.shown == "" {
		return
	}
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "%s: %s in %s\n", p.what, result, time.Since(p.start).Round(100*time.Millisecond))
}

// serverPhase extracts what llama-server says it is doing from one of its log lines ("0.00.019 I srv
// load_model: loading model '…'" → "load_model: loading model '…'"); ok is false for lines that are not
// load progress.
func serverPhase(line string) (string, bool) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return "", false
	}
	msg := strings.Join(f[3:], " ")
	switch f[2] {
	case "srv", "cmn", "load", "llama", "ggml", "main", "common":
	default:
		if !strings.HasPrefix(f[2], "llama_") && !strings.HasPrefix(f[2], "load_") && !strings.HasPrefix(f[2], "clip") {
			return "", false
		}
		msg = strings.Join(f[2:], " ")
	}
	if strings.Contains(msg, "security:") || strings.Contains(msg, "verbosity") {
		return "", false
	}
	return msg, true
}
