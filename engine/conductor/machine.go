package conductor

import (
	"fmt"
	"time"
)

// State is where the model server is in its life, as the conductor sees it.
type State int

const (
	// StateIdle: nothing started yet; the first EnsureReady starts the server.
	StateIdle State = iota
	// Starting: the first launch is in flight.
	StateStarting
	// Ready: the server answers requests.
	StateReady
	// Restarting: the server crashed (or was found dead) and is being launched again.
	StateRestarting
	// Relaunching: the server is being stopped and launched again in another mode, on purpose.
	StateRelaunching
	// Stopping: Close was called and the server is being stopped.
	StateStopping
	// Stopped: closed; nothing runs and nothing will be started.
	StateStopped
	// Failed: a launch failed or the restart budget is spent; EnsureReady returns the cause.
	StateFailed
)

func (s State) String() string {
	return [...]string{"idle", "starting", "ready", "restarting", "relaunching", "stopping", "stopped", "failed"}[s]
}

// machine is the conductor's decision core: pure, no goroutines, no clocks of its own. The loop feeds it events
// and carries out the effects it returns, so every transition is tested without a process (machine_test.go).
type machine struct {
	state State
	gen   int // launch generation: events about an older process are stale
	err   error
	mode  string
	// launching is true while a launch is in flight: a Close then waits for it, so the process it brings up is
	// stopped instead of outliving the conductor.
	launching bool
	crashes   []time.Time
	budget    int
	window    time.Duration
}

type eventKind int

const (
	evEnsure   eventKind = iota // a caller needs the server
	evLaunched                  // a launch finished (err set on failure)
	evExited                    // the process of generation gen exited
	evSuspect                   // a caller's request failed: check the server
	evRelaunch                  // switch to mode
	evClose                     // stop for good
	evStopped                   // the stop finished
	evWarmedUp                  // the warm-up of generation gen finished (loop only)
)

type event struct {
	kind eventKind
	gen  int
	err  error
	mode string
	at   time.Time
	proc Process // with evLaunched
}

type effectKind int

const (
	effLaunch      effectKind = iota // launch generation gen in mode
	effStop                          // stop the current process (then evStopped, or evExited for a relaunch)
	effProbe                         // health-check the current process; kill it if it is dead but not exited
	effAnswer                        // answer waiters: ready
	effFail                          // answer waiters with err
	effReport                        // tell observers (Event)
	effWarmup                        // warm the fresh process up, off the critical path
	effStopForMode                   // stop the current process so it can be launched in another mode
)

type effect struct {
	kind   effectKind
	gen    int
	mode   string
	err    error
	report Event
}

func (m *machine) step(ev event) []effect {
	effs := m.decide(ev)
	for _, e := range effs {
		if e.kind == effLaunch {
			m.launching = true
		}
	}
	return effs
}

func (m *machine) decide(ev event) []effect {
	switch ev.kind {
	case evEnsure:
		switch m.state {
		case StateIdle:
			m.state, m.gen = StateStarting, m.gen+1
			return []effect{{kind: effLaunch, gen: m.gen, mode: m.mode}, report(EventStarting, m.mode, nil)}
		case StateReady:
			return []effect{{kind: effAnswer}}
		case StateFailed, StateStopped:
			return []effect{{kind: effFail, err: m.failure()}}
		}
		return nil // starting, restarting, relaunching, stopping: the waiter is answered when that ends
	case evLaunched:
		if ev.gen != m.gen {
			return nil
		}
		m.launching = false
		if m.state == StateStopping {
			if ev.err != nil {
				m.state = StateStopped
				return []effect{{kind: effFail, err: m.failure()}, report(EventStopped, m.mode, nil)}
			}
			return []effect{{kind: effStop, gen: m.gen}}
		}
		if ev.err != nil {
			first := m.state == StateStarting
			m.state, m.err = StateFailed, ev.err
			if !first {
				m.err = fmt.Errorf("restart failed: %w", ev.err)
			}
			return []effect{{kind: effFail, err: m.err}, report(EventFailed, m.mode, m.err)}
		}
		m.state = StateReady
		return []effect{{kind: effAnswer}, report(EventReady, m.mode, nil), {kind: effWarmup, gen: m.gen}}
	case evExited:
		if ev.gen != m.gen {
			return nil
		}
		switch m.state {
		case StateReady:
			m.crashes = append(m.crashes, ev.at)
			cut := 0
			for cut < len(m.crashes) && ev.at.Sub(m.crashes[cut]) > m.window {
				cut++
			}
			m.crashes = m.crashes[cut:]
			if len(m.crashes) > m.budget {
				m.state = StateFailed
				m.err = fmt.Errorf("llama-server crashed %d times within %s, so it is not restarted again; last: %w",
					len(m.crashes), m.window, ev.err)
				return []effect{{kind: effFail, err: m.err}, report(EventCrashed, m.mode, ev.err), report(EventFailed, m.mode, m.err)}
			}
			m.state, m.gen = StateRestarting, m.gen+1
			return []effect{report(EventCrashed, m.mode, ev.err), {kind: effLaunch, gen: m.gen, mode: m.mode},
				report(EventRestarting, m.mode, nil)}
		case StateRelaunching:
			m.gen++
			return []effect{{kind: effLaunch, gen: m.gen, mode: m.mode}}
		case StateStopping:
			m.state = StateStopped
			return []effect{{kind: effFail, err: m.failure()}, report(EventStopped, m.mode, nil)}
		}
		return nil
	case evSuspect:
		if m.state == StateReady {
			return []effect{{kind: effProbe, gen: m.gen}}
		}
		return m.decide(event{kind: evEnsure})
	case evRelaunch:
		switch m.state {
		case StateReady:
			m.state, m.mode = StateRelaunching, ev.mode
			return []effect{report(EventRelaunching, ev.mode, nil), {kind: effStopForMode, gen: m.gen}}
		case StateIdle:
			m.mode = ev.mode
			return nil
		}
		return []effect{{kind: effFail, err: fmt.Errorf("cannot switch to mode %q while the server is %s", ev.mode, m.state)}}
	case evClose:
		switch m.state {
		case StateStopped:
			return []effect{{kind: effFail, err: m.failure()}}
		case StateIdle, StateFailed:
			m.state = StateStopped
			return []effect{{kind: effFail, err: m.failure()}}
		}
		m.state = StateStopping
		if m.launching {
			return nil // evLaunched stops what the launch brought up
		}
		return []effect{{kind: effStop, gen: m.gen}}
	case evStopped:
		if m.state == StateStopping {
			m.state = StateStopped
			return []effect{{kind: effFail, err: m.failure()}, report(EventStopped, m.mode, nil)}
		}
	}
	return nil
}

func (m *machine) failure() error {
	if m.state == StateStopped {
		return ErrClosed
	}
	return m.err
}

func report(kind EventKind, mode string, err error) effect {
	return effect{kind: effReport, report: Event{Kind: kind, Mode: mode, Err: err}}
}
