package session

import (
	"reflect"
	"testing"
)

// TestAheadMachineCut checks the transitions that plan the image window's cut and the re-evaluation after the
// engine's background warm-up, without a server: the state left and the effects asked for.
func TestAheadMachineCut(t *testing.T) {
	readyEff := []chainEffect{{kind: effReady}}
	done := []chainEffect{{kind: effDone}}
	cut := chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Gen: 1, WarmGen: 1, WarmLen: 6}
	for _, c := range []struct {
		name string
		in   chainState
		ev   chainEvent
		want chainState
		effs []chainEffect
	}{
		{"a turn ends before images that move the cut: the chain evaluates the shortened prefix",
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Busy: true, Gen: 1, WarmGen: 1, WarmLen: 6},
			chainEvent{kind: evTurnEnded},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Gen: 1, WarmGen: 1, WarmLen: 6,
				Phase: phaseReady, Plan: planCut}, readyEff},
		{"a turn ends and the next images do not move the cut: nothing",
			chainState{History: 6, HistoryImages: 3, Busy: true, Gen: 1, WarmGen: 1, WarmLen: 6}, chainEvent{kind: evTurnEnded},
			chainState{History: 6, HistoryImages: 3, Gen: 1, WarmGen: 1, WarmLen: 6}, nil},
		{"attachments made during the turn take precedence: their prefill renders the cut itself",
			chainState{Pending: 1, History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Busy: true},
			chainEvent{kind: evTurnEnded},
			chainState{Pending: 1, History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phasePlanning, Plan: planAttached},
			[]chainEffect{{kind: effPlan}}},
		{"the cut already evaluated for this length and launch is not evaluated again",
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Busy: true, Gen: 1, CutGen: 1, CutLen: 6},
			chainEvent{kind: evTurnEnded},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Gen: 1, CutGen: 1, CutLen: 6}, nil},
		{"a ready engine gets the history prefilled as the next request renders it, its images counted",
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phaseReady, Plan: planCut},
			chainEvent{kind: evEngine, gen: 1},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phasePrefilling, Plan: planCut,
				Gen: 1, CutGen: 1, CutLen: 6},
			[]chainEffect{{kind: effPrefill, gen: 1, expect: 1}}},
		{"the cut's prefill done: the history is warm as cut, and the chain looks again",
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phasePrefilling, Plan: planCut,
				Gen: 1, CutGen: 1, CutLen: 6},
			chainEvent{kind: evPrefilled},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phaseReady, Gen: 1, CutGen: 1, CutLen: 6,
				WarmGen: 1, WarmLen: 6}, readyEff},
		{"then nothing is left to do",
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phaseReady, Gen: 1, CutGen: 1, CutLen: 6,
				WarmGen: 1, WarmLen: 6},
			chainEvent{kind: evEngine, gen: 1},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Gen: 1, CutGen: 1, CutLen: 6, WarmGen: 1, WarmLen: 6},
			done},
		{"a failed cut prefill is not tried again for this length",
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phasePrefilling, Plan: planCut,
				Gen: 1, CutGen: 1, CutLen: 6, WarmGen: 1, WarmLen: 4},
			chainEvent{kind: evPrefilled, failed: true},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Phase: phaseReady, Gen: 1, CutGen: 1, CutLen: 6,
				WarmGen: 1, WarmLen: 4}, readyEff},
		{"images attached while the cut is evaluated are prefilled after it",
			chainState{Pending: 1, History: 6, HistoryImages: 3, Phase: phaseReady, Gen: 1, CutGen: 1, CutLen: 6, WarmGen: 1, WarmLen: 6},
			chainEvent{kind: evEngine, gen: 1},
			chainState{Pending: 1, History: 6, HistoryImages: 3, Phase: phasePrefilling, Plan: planAttached, Gen: 1, CutGen: 1, CutLen: 6,
				WarmGen: 1, WarmLen: 6, Sent: 1, SentGen: 1},
			[]chainEffect{{kind: effPrefill, gen: 1, images: 1, adopt: true}}},
		{"the warm-up ended after the attachments were prefilled: they are prefilled again",
			chainState{Pending: 1, History: 2, HistoryImages: 1, Gen: 1, Sent: 1, SentGen: 1, Prefilled: 1, WarmGen: 1, WarmLen: 2},
			chainEvent{kind: evWarmedUp, gen: 1},
			chainState{Pending: 1, History: 2, HistoryImages: 1, Gen: 1, Phase: phaseReady, Plan: planAttached}, readyEff},
		{"and the ready engine gets them sent again, as the attachments' own plan",
			chainState{Pending: 1, History: 2, HistoryImages: 1, Gen: 1, Phase: phaseReady, Plan: planAttached},
			chainEvent{kind: evEngine, gen: 1},
			chainState{Pending: 1, History: 2, HistoryImages: 1, Gen: 1, Phase: phasePrefilling, Plan: planAttached, Sent: 1, SentGen: 1},
			[]chainEffect{{kind: effPrefill, gen: 1, images: 1}}},
		{"the warm-up ended with a history in the cache: it is evaluated again",
			chainState{History: 2, HistoryImages: 1, Gen: 1, WarmGen: 1, WarmLen: 2},
			chainEvent{kind: evWarmedUp, gen: 1},
			chainState{History: 2, HistoryImages: 1, Gen: 1, Phase: phaseReady}, readyEff},
		{"the warm-up ended before a cut: the cut is evaluated again",
			cut, chainEvent{kind: evWarmedUp, gen: 1},
			chainState{History: 6, HistoryImages: 3, CutAhead: true, CutExpect: 1, Gen: 1, Phase: phaseReady, Plan: planCut}, readyEff},
		{"the warm-up of another launch changes nothing",
			chainState{History: 2, HistoryImages: 1, Gen: 2, WarmGen: 2, WarmLen: 2},
			chainEvent{kind: evWarmedUp, gen: 1},
			chainState{History: 2, HistoryImages: 1, Gen: 2, WarmGen: 2, WarmLen: 2}, nil},
		{"the warm-up ended while a prefill runs: that chain sends again when it ends",
			chainState{Pending: 1, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 1, SentGen: 1},
			chainEvent{kind: evWarmedUp, gen: 1},
			chainState{Pending: 1, Phase: phasePrefilling, Plan: planAttached, Gen: 1, Sent: 1}, nil},
		{"the warm-up ended during a turn: the turn's requests fill the cache",
			chainState{Pending: 0, History: 2, HistoryImages: 1, Busy: true, Gen: 1, WarmGen: 1, WarmLen: 2},
			chainEvent{kind: evWarmedUp, gen: 1},
			chainState{History: 2, HistoryImages: 1, Busy: true, Gen: 1}, nil},
		{"no warm-up re-evaluation with lookahead off",
			chainState{NoPrefill: true, Pending: 1, Gen: 1, Sent: 1, SentGen: 1},
			chainEvent{kind: evWarmedUp, gen: 1},
			chainState{NoPrefill: true, Pending: 1, Gen: 1, Sent: 1}, nil},
	} {
		got, effs := decide(c.in, c.ev)
		if !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(effs, c.effs) {
			t.Errorf("%s:\n got  %+v %+v\n want %+v %+v", c.name, got, effs, c.want, c.effs)
		}
	}
}
