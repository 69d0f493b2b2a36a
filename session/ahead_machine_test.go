package session

import (
	"reflect"
	"testing"
)

// TestAheadMachine checks every transition of the ahead-of-time machine without a server: the state it leaves
// and the effects it asks for.
func TestAheadMachine(t *testing.T) {
	withHistory := chainState{History: 2, HistoryImages: 1}
	attached := chainState{Pending: 1}
	planning := chainState{Pending: 1, Phase: phasePlanning, Plan: planAttached}
	ready := chainState{Pending: 1, Phase: phaseReady, Plan: planAttached}
	plan := func(history bool) []chainEffect { return []chainEffect{{kind: effPlan, history: history}} }
	readyEff := []chainEffect{{kind: effReady}}
	done := []chainEffect{{kind: effDone}}
	for _, c := range []struct {
		name string
		in   chainState
		ev   chainEvent
		want chainState
		effs []chainEffect
	}{
		{"an attachment starts a chain with the scheduler's plan", attached, chainEvent{kind: evAttached},
			chainState{Pending: 1, Phase: phasePlanning, Plan: planAttached}, plan(false)},
		{"an attachment with lookahead off does nothing", chainState{NoPrefill: true, Pending: 1}, chainEvent{kind: evAttached},
			chainState{NoPrefill: true, Pending: 1}, nil},
		{"an attachment during a turn waits for its end", chainState{Pending: 1, Busy: true}, chainEvent{kind: evAttached},
			chainState{Pending: 1, Busy: true}, nil},
		{"an attachment while a prefill runs is taken by that chain, no second one", chainState{Pending: 2, Sent: 1, Phase: phasePrefilling, Plan: planAttached},
			chainEvent{kind: evAttached}, chainState{Pending: 2, Sent: 1, Phase: phasePrefilling, Plan: planAttached}, nil},
		{"a new chain forgets what the last one sent", chainState{Pending: 1, Sent: 3, SentGen: 2}, chainEvent{kind: evAttached},
			chainState{Pending: 1, Phase: phasePlanning, Plan: planAttached}, plan(false)},
		{"the scheduler chose a prefill: get the engine ready", planning, chainEvent{kind: evPlanned, prefill: true},
			chainState{Pending: 1, Phase: phaseReady, Plan: planAttached}, readyEff},
		{"the scheduler chose to wait: the chain ends", planning, chainEvent{kind: evPlanned},
			attached, done},
		{"a plan's answer with no chain is stale", attached, chainEvent{kind: evPlanned, prefill: true}, attached, nil},
		{"an engine that is not ready ends the chain", ready, chainEvent{kind: evEngine, failed: true}, attached, done},
		{"a ready engine gets the attachments prefilled", ready, chainEvent{kind: evEngine, gen: 1},
			chainState{Pending: 1, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1},
			[]chainEffect{{kind: effPrefill, gen: 1, images: 1}}},
		{"an engine answer outside the ready phase is stale", planning, chainEvent{kind: evEngine, gen: 1}, planning, nil},
		{"a done prefill marks the attachments and the history evaluated, then looks again",
			chainState{Pending: 1, History: 2, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1},
			chainEvent{kind: evPrefilled},
			chainState{Pending: 1, History: 2, Phase: phaseReady, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1, Prefilled: 1, WarmGen: 1, WarmLen: 2},
			readyEff},
		{"a failed prefill marks nothing and looks again",
			chainState{Pending: 1, History: 2, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1},
			chainEvent{kind: evPrefilled, failed: true},
			chainState{Pending: 1, History: 2, Phase: phaseReady, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1}, readyEff},
		{"caught up: the attachments this launch has are not sent again, the chain ends",
			chainState{Pending: 1, Phase: phaseReady, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1, Prefilled: 1},
			chainEvent{kind: evEngine, gen: 1}, chainState{Pending: 1, Gen: 1, Sent: 1, SentGen: 1, Prefilled: 1}, done},
		{"a failed attachment prefill is not tried again on the same launch",
			chainState{Pending: 1, Phase: phaseReady, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1},
			chainEvent{kind: evEngine, gen: 1}, chainState{Pending: 1, Gen: 1, Sent: 1, SentGen: 1}, done},
		{"images attached during the prefill are carried in one more",
			chainState{Pending: 3, Phase: phaseReady, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1, Prefilled: 1},
			chainEvent{kind: evEngine, gen: 1},
			chainState{Pending: 3, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 3, SentGen: 1, Prefilled: 1},
			[]chainEffect{{kind: effPrefill, gen: 1, images: 3}}},
		{"the engine relaunched under the chain: the attachments go again",
			chainState{Pending: 1, Phase: phaseReady, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1, Prefilled: 1},
			chainEvent{kind: evEngine, gen: 2},
			chainState{Pending: 1, Phase: phasePrefilling, Plan: planAttached, Gen: 2, Sent: 1, SentGen: 2, Prefilled: 1},
			[]chainEffect{{kind: effPrefill, gen: 2, images: 1}}},
		{"a resumed history with images is warmed", withHistory, chainEvent{kind: evRewarm},
			chainState{History: 2, HistoryImages: 1, Phase: phaseReady}, readyEff},
		{"a history without images is not", chainState{History: 2}, chainEvent{kind: evRewarm}, chainState{History: 2}, nil},
		{"no rewarm while a turn runs", chainState{History: 2, HistoryImages: 1, Busy: true}, chainEvent{kind: evRewarm},
			chainState{History: 2, HistoryImages: 1, Busy: true}, nil},
		{"no rewarm with lookahead off", chainState{NoPrefill: true, History: 2, HistoryImages: 1}, chainEvent{kind: evRewarm},
			chainState{NoPrefill: true, History: 2, HistoryImages: 1}, nil},
		{"no second chain for a rewarm", chainState{History: 2, HistoryImages: 1, Phase: phasePrefilling, Plan: planHistory},
			chainEvent{kind: evRewarm}, chainState{History: 2, HistoryImages: 1, Phase: phasePrefilling, Plan: planHistory}, nil},
		{"a ready engine that has not seen the history: ask the scheduler",
			chainState{History: 2, HistoryImages: 1, Phase: phaseReady}, chainEvent{kind: evEngine, gen: 1},
			chainState{History: 2, HistoryImages: 1, Phase: phasePlanning, Plan: planHistory, Gen: 1, TriedGen: 1, TriedLen: 2},
			plan(true)},
		{"the scheduler chose the history's prefill: on the launch it was planned for",
			chainState{History: 2, HistoryImages: 1, Phase: phasePlanning, Plan: planHistory, Gen: 1, TriedGen: 1, TriedLen: 2},
			chainEvent{kind: evPlanned, prefill: true},
			chainState{History: 2, HistoryImages: 1, Phase: phasePrefilling, Plan: planHistory, Gen: 1, TriedGen: 1, TriedLen: 2},
			[]chainEffect{{kind: effPrefill, gen: 1}}},
		{"the scheduler declined the history's prefill: the chain ends",
			chainState{History: 2, HistoryImages: 1, Phase: phasePlanning, Plan: planHistory, Gen: 1, TriedGen: 1, TriedLen: 2},
			chainEvent{kind: evPlanned},
			chainState{History: 2, HistoryImages: 1, Gen: 1, TriedGen: 1, TriedLen: 2}, done},
		{"a history prefill done marks only the history (no attachments counted)",
			chainState{History: 2, HistoryImages: 1, Phase: phasePrefilling, Plan: planHistory, Gen: 1, TriedGen: 1, TriedLen: 2},
			chainEvent{kind: evPrefilled},
			chainState{History: 2, HistoryImages: 1, Phase: phaseReady, Plan: planHistory, Gen: 1, TriedGen: 1, TriedLen: 2, WarmGen: 1, WarmLen: 2},
			readyEff},
		{"the history this launch holds is not warmed again",
			chainState{History: 2, HistoryImages: 1, Phase: phaseReady, Plan: planHistory, Gen: 1, WarmGen: 1, WarmLen: 2},
			chainEvent{kind: evEngine, gen: 1},
			chainState{History: 2, HistoryImages: 1, Gen: 1, WarmGen: 1, WarmLen: 2}, done},
		{"a history prefill tried on this launch is not tried again",
			chainState{History: 2, HistoryImages: 1, Phase: phaseReady, Gen: 1, TriedGen: 1, TriedLen: 2},
			chainEvent{kind: evEngine, gen: 1},
			chainState{History: 2, HistoryImages: 1, Gen: 1, TriedGen: 1, TriedLen: 2}, done},
		{"a new launch warms the history again though the old one held it",
			chainState{History: 2, HistoryImages: 1, Phase: phaseReady, Gen: 1, WarmGen: 1, WarmLen: 2, TriedGen: 1, TriedLen: 2},
			chainEvent{kind: evEngine, gen: 2},
			chainState{History: 2, HistoryImages: 1, Phase: phasePlanning, Plan: planHistory, Gen: 2, WarmGen: 1, WarmLen: 2, TriedGen: 2, TriedLen: 2},
			plan(true)},
		{"images attached while the history warms are adopted by that chain",
			chainState{Pending: 1, History: 2, HistoryImages: 1, Phase: phaseReady, Plan: planHistory, Gen: 1, WarmGen: 1, WarmLen: 2},
			chainEvent{kind: evEngine, gen: 1},
			chainState{Pending: 1, History: 2, HistoryImages: 1, Phase: phasePrefilling, Plan: planAttached, Gen: 1, WarmGen: 1, WarmLen: 2, Sent: 1, SentGen: 1},
			[]chainEffect{{kind: effPrefill, gen: 1, images: 1, adopt: true}}},
		{"attachments come before the history's images", chainState{Pending: 1, History: 2, HistoryImages: 1, Phase: phaseReady},
			chainEvent{kind: evEngine, gen: 1},
			chainState{Pending: 1, History: 2, HistoryImages: 1, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1},
			[]chainEffect{{kind: effPrefill, gen: 1, images: 1, adopt: true}}},
		{"a turn takes the session; the running chain goes on", chainState{Pending: 1, Phase: phasePrefilling, Plan: planAttached},
			chainEvent{kind: evTurnStarted}, chainState{Pending: 1, Phase: phasePrefilling, Plan: planAttached, Busy: true}, nil},
		{"a turn's end plans what was attached during it", chainState{Pending: 1, Busy: true}, chainEvent{kind: evTurnEnded},
			chainState{Pending: 1, Phase: phasePlanning, Plan: planAttached}, plan(false)},
		{"a turn's end with nothing attached does nothing", chainState{History: 2, HistoryImages: 1, Busy: true},
			chainEvent{kind: evTurnEnded}, chainState{History: 2, HistoryImages: 1}, nil},
		{"a turn the engine crashed under warms the history on the new launch", chainState{History: 2, HistoryImages: 1, Busy: true},
			chainEvent{kind: evTurnEnded, crashed: true}, chainState{History: 2, HistoryImages: 1, Phase: phaseReady}, readyEff},
		{"a crash with attachments left plans the attachments first", chainState{Pending: 1, History: 2, HistoryImages: 1, Busy: true},
			chainEvent{kind: evTurnEnded, crashed: true}, chainState{Pending: 1, History: 2, HistoryImages: 1, Phase: phasePlanning, Plan: planAttached}, plan(false)},
		{"a turn's end with lookahead off only frees the session", chainState{NoPrefill: true, Pending: 1, Busy: true},
			chainEvent{kind: evTurnEnded}, chainState{NoPrefill: true, Pending: 1}, nil},
		{"a kept turn: its launch holds the history, the taken attachments' count goes",
			chainState{History: 4, Busy: true, Prefilled: 1, WarmGen: 1, WarmLen: 2}, chainEvent{kind: evKept, gen: 1},
			chainState{History: 4, Busy: true, WarmGen: 1, WarmLen: 4}, nil},
		{"a kept turn that failed: no launch is known to hold it", chainState{History: 4, Busy: true, WarmGen: 1, WarmLen: 2},
			chainEvent{kind: evKept}, chainState{History: 4, Busy: true, WarmGen: 1, WarmLen: 2}, nil},
		{"a compaction forgets which launch held the history", chainState{History: 3, WarmGen: 1, WarmLen: 3, Busy: true},
			chainEvent{kind: evCompacted}, chainState{History: 3, Busy: true}, nil},
		{"cleared attachments are no longer prefilled", chainState{Prefilled: 2, Sent: 2, SentGen: 1},
			chainEvent{kind: evCleared}, chainState{Sent: 2, SentGen: 1}, nil},
		{"a refused turn's attachments go", chainState{Prefilled: 1, Busy: true}, chainEvent{kind: evDropped},
			chainState{Busy: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, effs := decide(c.in, c.ev)
			if got != c.want {
				t.Errorf("%s in %+v:\n got state %+v\nwant state %+v", c.ev.kind, c.in, got, c.want)
			}
			if !reflect.DeepEqual(effs, c.effs) {
				t.Errorf("%s in %+v: effects %v, want %v", c.ev.kind, c.in, effs, c.effs)
			}
		})
	}
}

// TestAheadMachineOneChain drives the machine through every event in every reachable state and checks its
// promise: an event from outside the chain starts effects only when no chain runs, at most one effect that
// answers is out at a time, and the phase says which.
func TestAheadMachineOneChain(t *testing.T) {
	outside := []chainEvent{{kind: evAttached}, {kind: evCleared}, {kind: evRewarm}, {kind: evTurnStarted},
		{kind: evTurnEnded}, {kind: evTurnEnded, crashed: true}, {kind: evKept, gen: 1}, {kind: evKept}, {kind: evDropped},
		{kind: evCompacted}}
	answers := map[chainEffectKind][]chainEvent{
		effPlan:    {{kind: evPlanned, prefill: true}, {kind: evPlanned}},
		effReady:   {{kind: evEngine, gen: 1}, {kind: evEngine, gen: 2}, {kind: evEngine, failed: true}},
		effPrefill: {{kind: evPrefilled}, {kind: evPrefilled, failed: true}},
	}
	phaseOf := map[chainEffectKind]chainPhase{effPlan: phasePlanning, effReady: phaseReady, effPrefill: phasePrefilling}
	type node struct {
		s   chainState
		out *chainEffect // the effect out, nil when none
	}
	var starts []chainState
	for _, pending := range []int{0, 1} {
		for _, images := range []int{0, 1} {
			for _, off := range []bool{false, true} {
				starts = append(starts, chainState{NoPrefill: off, Pending: pending, History: 2, HistoryImages: images})
			}
		}
	}
	type key struct {
		s   chainState
		out chainEffect
		has bool
	}
	seen := map[key]bool{}
	var queue []node
	for _, s := range starts {
		queue = append(queue, node{s: s})
	}
	steps := 0
	for len(queue) > 0 && steps < 100000 {
		n := queue[0]
		queue = queue[1:]
		k := key{s: n.s, has: n.out != nil}
		if n.out != nil {
			k.out = *n.out
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		steps++
		if (n.out == nil) != (n.s.Phase == phaseIdle) || n.out != nil && phaseOf[n.out.kind] != n.s.Phase {
			t.Fatalf("state %+v with effect %v out: the phase does not say what is out", n.s, n.out)
		}
		evs := append([]chainEvent(nil), outside...)
		if n.out != nil {
			evs = append(evs, answers[n.out.kind]...)
		}
		for _, ev := range evs {
			// Facts change outside the machine too: an attachment arrives, a turn grows the history.
			s := n.s
			switch ev.kind {
			case evAttached:
				s.Pending = min(s.Pending+1, 2)
			case evCleared, evDropped:
				s.Pending = 0
			case evKept:
				s.History, s.HistoryImages = min(s.History+2, 4), min(s.HistoryImages+s.Pending, 2)
			}
			got, effs := decide(s, ev)
			var answering []chainEffect
			for _, e := range effs {
				if e.kind != effDone {
					answering = append(answering, e)
				}
			}
			isAnswer := n.out != nil && ev.kind != evAttached && len(answers[n.out.kind]) > 0 && containsEvent(answers[n.out.kind], ev)
			switch {
			case len(answering) > 1:
				t.Fatalf("%s in %+v: %d effects out at once: %v", ev.kind, s, len(answering), effs)
			case len(answering) == 1 && n.out != nil && !isAnswer:
				t.Fatalf("%s in %+v (effect %v out): a second chain: %v", ev.kind, s, *n.out, effs)
			case len(answering) == 1 && s.NoPrefill:
				t.Fatalf("%s in %+v: a chain with lookahead off: %v", ev.kind, s, effs)
			}
			next := node{s: got}
			switch {
			case len(answering) == 1:
				next.out = &answering[0]
			case isAnswer:
				next.out = nil
			default:
				next.out = n.out
			}
			queue = append(queue, next)
		}
	}
	t.Logf("%d states walked", steps)
	if steps < 50 {
		t.Fatalf("only %d states reached: the walk does not cover the machine", steps)
	}
}

func containsEvent(evs []chainEvent, ev chainEvent) bool {
	for _, e := range evs {
		if e == ev {
			return true
		}
	}
	return false
}
