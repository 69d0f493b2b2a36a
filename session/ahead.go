package session

// The ahead-of-time chain of one session, as a machine in the shape of engine/conductor's: decide is pure (no
// goroutines, clocks, locks or I/O) and returns the effects to carry out; the session carries them out outside
// its lock and reports each outcome back as an event (ahead_run.go). At most one effect is out at a time, so a
// session has at most one chain: planning with the scheduler, getting the engine ready, prefilling, and again
// until what the next request carries is evaluated.

// chainPhase is what a session's chain is doing.
type chainPhase int

const (
	phaseIdle       chainPhase = iota // no chain runs
	phasePlanning                     // effPlan is out: the scheduler is asked
	phaseReady                        // effReady is out: the engine is being made ready
	phasePrefilling                   // effPrefill is out
)

func (p chainPhase) String() string {
	return [...]string{"idle", "planning", "ready", "prefilling"}[p]
}

// chainPlan says what the running chain carries out: the attachments' plan, the history's, or none yet (a
// rewarm that has not looked at the engine).
type chainPlan int

const (
	planNone chainPlan = iota
	planAttached
	planHistory
	// planCut evaluates the history as the next request will render it when the image window's cut moves with
	// its images (swap.PlanCut): done at the end of a turn, while the user reads and types.
	planCut
)

// chainState is what the machine knows. The first fields are facts about the session's data, set from it
// before every decision (so they cannot drift from it); the rest is the machine's own.
type chainState struct {
	NoPrefill     bool // lookahead is off (a baseline)
	Pending       int  // images attached for the next message
	History       int  // messages in the history
	HistoryImages int  // images in them
	// CutAhead says the next message's images will move the image window's cut and the scheduler wants the
	// shortened prefix evaluated before they come (swap.PlanCut); CutExpect is how many images it counts on.
	CutAhead  bool
	CutExpect int

	Phase chainPhase
	Plan  chainPlan
	Busy  bool // a turn runs: its own requests fill the cache, it starts the chain at its end
	// Gen is the engine launch (conductor generation) the chain works against, from its last evEngine.
	Gen int
	// Prefilled of the Pending images were evaluated by launch WarmGen.
	Prefilled int
	// Sent and SentGen are the images the chain's last attachment prefill carried and its launch: the chain
	// sends them again only when more were attached or the engine relaunched.
	Sent, SentGen int
	// WarmGen and WarmLen say the launch whose cache holds History[:WarmLen] (0: none of this process's).
	WarmGen, WarmLen int
	// TriedGen and TriedLen mark a history prefill already tried, so a failed or declined one is not tried again.
	TriedGen, TriedLen int
	// CutGen and CutLen mark the cut prefill already tried for a history length on a launch.
	CutGen, CutLen int
}

// chain reports whether a chain runs.
func (s chainState) chain() bool { return s.Phase != phaseIdle }

// canStart reports whether a chain may start now: lookahead is on, none runs, and no turn runs.
func (s chainState) canStart() bool { return !s.NoPrefill && !s.chain() && !s.Busy }

// chainEventKind names what happened.
type chainEventKind int

const (
	evAttached    chainEventKind = iota // images were queued for the next message
	evCleared                           // the attachments were dropped (the chain had ended)
	evRewarm                            // the history may hold images the engine has not evaluated: opened, or a new launch
	evTurnStarted                       // a turn took the session
	evTurnEnded                         // the turn ended (Crashed: the engine restarted under it)
	evKept                              // a turn's messages joined the history; Gen: the launch whose cache holds it, 0 unknown
	evDropped                           // a refused turn's attachments were dropped
	evCompacted                         // the history was replaced by a summary: no launch's cache holds it
	evPlanned                           // effPlan's answer: Prefill says whether the scheduler chose a prefill
	evEngine                            // effReady's answer: the engine's launch Gen, or Failed
	evPrefilled                         // effPrefill's answer: Failed or done
	// evWarmedUp: launch Gen's background warm-up ended. Its requests ran in the server's slot, so what a
	// prefill left there while they ran may have been pushed out (to the server's host-memory prompt cache at best,
	// which the next request then restores on its critical path).
	evWarmedUp
)

var chainEventNames = [...]string{"attached", "cleared", "rewarm", "turn-started", "turn-ended", "kept", "dropped",
	"compacted", "planned", "engine", "prefilled", "warmed-up"}

func (k chainEventKind) String() string { return chainEventNames[k] }

type chainEvent struct {
	kind    chainEventKind
	gen     int
	prefill bool
	failed  bool
	crashed bool
}

// chainEffectKind names what the session is to do.
type chainEffectKind int

const (
	// effPlan asks the scheduler about the attachments (history false) or the history's images, records its
	// decisions and carries out its relaunches; answer evPlanned.
	effPlan chainEffectKind = iota
	// effReady gets the engine ready; answer evEngine.
	effReady
	// effPrefill evaluates, on launch gen, the history and the first images attachments (0: the history alone);
	// adopt says the attachments had no plan of their own (attached while the chain warmed the history); expect,
	// for the history alone, counts images the next request will add (the image window renders the history with
	// them: planCut); answer evPrefilled.
	effPrefill
	// effDone: the chain ended; wake whoever waits for it.
	effDone
)

var chainEffectNames = [...]string{"plan", "ready", "prefill", "done"}

func (k chainEffectKind) String() string { return chainEffectNames[k] }

type chainEffect struct {
	kind    chainEffectKind
	history bool // effPlan
	gen     int  // effPrefill
	images  int  // effPrefill
	adopt   bool // effPrefill
	expect  int  // effPrefill
}

// decide is the machine: the state after ev and what to do. It never returns a second effect that reports an
// answer while one is out: events from outside the chain start one only when none runs.
func decide(s chainState, ev chainEvent) (chainState, []chainEffect) {
	switch ev.kind {
	case evAttached:
		if s.canStart() {
			return startPlan(s, false)
		}
		return s, nil // a running chain takes them when its prefill ends; a running turn plans them at its end
	case evCleared, evDropped:
		s.Prefilled = 0
		return s, nil
	case evRewarm:
		if s.canStart() && s.HistoryImages > 0 {
			return startReady(s, planNone)
		}
		return s, nil
	case evTurnStarted:
		s.Busy = true // a running chain goes on: the turn waits for it, since its work is the turn's own
		return s, nil
	case evTurnEnded:
		s.Busy = false
		switch {
		case !s.canStart():
		case s.Pending > 0:
			return startPlan(s, false) // attached during the turn: for the next message
		case ev.crashed && s.HistoryImages > 0:
			return startReady(s, planNone) // the new launch's cache is empty
		case s.CutAhead && (s.CutGen != s.Gen || s.CutLen != s.History):
			return startReady(s, planCut) // the next images move the window's cut: its re-evaluation now
		}
		return s, nil
	case evWarmedUp:
		// What this launch's cache was said to hold may be gone: evaluate it again, off the critical path.
		reset := false
		if s.SentGen == ev.gen {
			s.SentGen, reset = 0, true
		}
		if s.WarmGen == ev.gen {
			s.WarmGen, s.WarmLen, s.Prefilled, reset = 0, 0, 0, true
		}
		if s.TriedGen == ev.gen {
			s.TriedGen, s.TriedLen = 0, 0
		}
		if s.CutGen == ev.gen {
			s.CutGen, s.CutLen, reset = 0, 0, true
		}
		if !reset || !s.canStart() {
			return s, nil // a running chain sends again when its prefill ends; a running turn fills the cache itself
		}
		switch {
		case s.Pending > 0:
			return startReady(s, planAttached)
		case s.CutAhead:
			return startReady(s, planCut)
		case s.HistoryImages > 0:
			return startReady(s, planNone)
		}
		return s, nil
	case evKept:
		s.Prefilled = 0 // the taken attachments are in the history; any left were attached after the turn began
		if ev.gen != 0 {
			s.WarmGen, s.WarmLen = ev.gen, s.History
		}
		return s, nil
	case evCompacted:
		s.WarmGen, s.WarmLen = 0, 0
		return s, nil
	case evPlanned:
		if s.Phase != phasePlanning {
			return s, nil
		}
		if !ev.prefill {
			return end(s)
		}
		if s.Plan == planHistory {
			s.Phase = phasePrefilling
			return s, []chainEffect{{kind: effPrefill, gen: s.Gen}}
		}
		s.Phase = phaseReady
		return s, []chainEffect{{kind: effReady}}
	case evEngine:
		if s.Phase != phaseReady {
			return s, nil
		}
		if ev.failed {
			return end(s) // the images are encoded with the next request
		}
		s.Gen = ev.gen
		return next(s)
	case evPrefilled:
		if s.Phase != phasePrefilling {
			return s, nil
		}
		if !ev.failed {
			if s.Plan == planAttached {
				s.Prefilled = s.Sent
			}
			s.WarmGen, s.WarmLen = s.Gen, s.History
		}
		if s.Plan == planCut {
			s.Plan = planNone // done (or failed: not tried again for this length)
		}
		// Again: more may have been attached meanwhile, or the engine relaunched under the prefill.
		s.Phase = phaseReady
		return s, []chainEffect{{kind: effReady}}
	}
	return s, nil
}

// next is what a chain does with a ready engine: the attachments it has not carried to this launch, else a
// history this launch has not evaluated (once per launch and length), else nothing.
func next(s chainState) (chainState, []chainEffect) {
	switch {
	case s.Pending > 0 && (s.Pending != s.Sent || s.SentGen != s.Gen):
		adopt := s.Plan != planAttached
		s.Plan, s.Phase = planAttached, phasePrefilling
		s.Sent, s.SentGen = s.Pending, s.Gen
		return s, []chainEffect{{kind: effPrefill, gen: s.Gen, images: s.Pending, adopt: adopt}}
	case s.Plan == planCut && s.Pending == 0 && (s.CutGen != s.Gen || s.CutLen != s.History):
		// The history as the next request renders it: the cut's stubs in place, its images still to come.
		s.CutGen, s.CutLen = s.Gen, s.History
		s.Phase = phasePrefilling
		return s, []chainEffect{{kind: effPrefill, gen: s.Gen, expect: max(s.CutExpect, 1)}}
	case s.Pending == 0 && s.HistoryImages > 0 && (s.WarmGen != s.Gen || s.WarmLen != s.History) &&
		(s.TriedGen != s.Gen || s.TriedLen != s.History):
		s.TriedGen, s.TriedLen = s.Gen, s.History
		s.Plan, s.Phase = planHistory, phasePlanning
		return s, []chainEffect{{kind: effPlan, history: true}}
	}
	return end(s)
}

func startPlan(s chainState, history bool) (chainState, []chainEffect) {
	s.Sent, s.SentGen = 0, 0
	s.Plan, s.Phase = planAttached, phasePlanning
	if history {
		s.Plan = planHistory
	}
	return s, []chainEffect{{kind: effPlan, history: history}}
}

func startReady(s chainState, plan chainPlan) (chainState, []chainEffect) {
	s.Sent, s.SentGen = 0, 0
	s.Plan, s.Phase = plan, phaseReady
	return s, []chainEffect{{kind: effReady}}
}

func end(s chainState) (chainState, []chainEffect) {
	s.Plan, s.Phase = planNone, phaseIdle
	return s, []chainEffect{{kind: effDone}}
}
