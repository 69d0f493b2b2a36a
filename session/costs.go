package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"time"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/swap"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

// CostBook keeps the engines' measured cost models between processes; cmd/visor backs it with the store.
type CostBook interface {
	LoadCosts(ctx context.Context, key swap.Key) (swap.Costs, bool, error)
	SaveCosts(ctx context.Context, c swap.Costs) error
}

// CostRows is where StoredCosts keeps the models: one JSON document per engine key; *memory.Store is one.
type CostRows interface {
	LoadEngineCosts(ctx context.Context, key string) (memory.EngineCosts, bool, error)
	SaveEngineCosts(ctx context.Context, key string, costs []byte) error
}

// StoredCosts is the CostBook over the conversation database.
type StoredCosts struct{ Rows CostRows }

// LoadCosts reads the model stored for key; a stored model that no longer validates is an error naming the key.
func (s StoredCosts) LoadCosts(ctx context.Context, key swap.Key) (swap.Costs, bool, error) {
	row, ok, err := s.Rows.LoadEngineCosts(ctx, key.String())
	if err != nil || !ok {
		return swap.Costs{}, ok, err
	}
	c, err := swap.ParseCosts(row.Costs)
	if err != nil {
		return swap.Costs{}, false, fmt.Errorf("stored costs of engine %s: %w", key.String(), err)
	}
	return c, true, nil
}

// SaveCosts stores c under its key.
func (s StoredCosts) SaveCosts(ctx context.Context, c swap.Costs) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("engine costs of %s: %w", c.Key.String(), err)
	}
	return s.Rows.SaveEngineCosts(ctx, c.Key.String(), b)
}

// EngineCosts says which cost model a launched engine has: its key, where it encodes images (the engine's flags
// and placement decide), and the model it starts from before anything was measured on it.
type EngineCosts struct {
	Key          swap.Key
	EncodesOnCPU bool
	Defaults     swap.Costs
	// Profile is the profile the engine was launched in, when its launch mode names one.
	Profile swap.Profile
	// FirstImage is the launch's GPU warm-up image request and FirstImageTokens its prompt tokens: what it took
	// beyond an encode at the model's GPU rate is the one-time pipeline compile (near zero once the driver's
	// cache holds it). Zero: no warm-up ran.
	FirstImage       time.Duration
	FirstImageTokens int
}

// engineCosts is what the service knows about the running engine's costs.
type engineCosts struct {
	gen   int // the engine generation it was read for
	info  EngineCosts
	costs swap.Costs
	// relaunch is the duration of a relaunch whose engine has not been seen ready yet (it is that engine's cost).
	relaunch time.Duration
}

// costsFor reads the cost model of a ready engine the first time its generation is seen: the stored one when
// the book has it, else the engine's defaults. The service's profile follows the profiles that engine offers.
func (s *Service) costsFor(ctx context.Context, r conductor.Ready) {
	if s.cfg.EngineCosts == nil {
		return
	}
	s.costMu.Lock()
	defer s.costMu.Unlock()
	if s.cost != nil && s.cost.gen == r.Generation {
		return
	}
	info, ok := s.cfg.EngineCosts(r)
	if !ok {
		return
	}
	c := info.Defaults
	c.Key = info.Key
	if book := s.cfg.Costs; book != nil {
		stored, found, err := book.LoadCosts(ctx, info.Key)
		switch {
		case err != nil:
			s.cfg.Logger.Warn("stored engine costs unreadable; planning with the defaults", "key", info.Key.String(), "err", err)
		case found:
			c = stored
		}
	}
	pending := time.Duration(0)
	if s.cost != nil {
		pending = s.cost.relaunch
	}
	s.cost = &engineCosts{gen: r.Generation, info: info, costs: c}
	s.mu.Lock()
	s.profile = swap.LaunchedProfile(info.Profile, c, s.profile)
	s.mu.Unlock()
	var samples []swap.Sample
	if pending > 0 {
		samples = append(samples, swap.Sample{Relaunch: swap.Duration(pending)})
	}
	if info.FirstImage > 0 {
		samples = append(samples, swap.CompileSample(info.FirstImage, info.FirstImageTokens, c))
	}
	s.observeLocked(samples...)
}

// EnsureReady starts the engine now (for front ends that serve many requests) and reads what the service keeps
// per launch: its properties and its cost model, so the first attachment is planned with them.
func (s *Service) EnsureReady(ctx context.Context) error {
	_, _, err := s.ready(ctx, false)
	return err
}

// Costs is the running engine's cost model as the scheduler plans with it (measured numbers where samples
// exist), and whether one is known yet.
func (s *Service) Costs() (swap.Costs, bool) {
	s.costMu.Lock()
	defer s.costMu.Unlock()
	if s.cost == nil {
		if s.cfg.Scheduler != nil {
			return s.cfg.Scheduler.Costs, false
		}
		return swap.Costs{}, false
	}
	return s.cost.costs, true
}

// scheduler is the configured scheduler planning with the running engine's current costs.
func (s *Service) scheduler() *swap.Scheduler {
	if s.cfg.Scheduler == nil {
		return nil
	}
	sched := *s.cfg.Scheduler
	s.costMu.Lock()
	if s.cost != nil {
		sched.Costs = s.cost.costs
	}
	s.costMu.Unlock()
	return &sched
}

// observe folds measurements into the running engine's cost model and keeps it in the book.
func (s *Service) observe(samples ...swap.Sample) {
	s.costMu.Lock()
	defer s.costMu.Unlock()
	s.observeLocked(samples...)
}

func (s *Service) observeLocked(samples ...swap.Sample) {
	if s.cost == nil || len(samples) == 0 {
		return
	}
	for _, smp := range samples {
		s.cost.costs = s.cost.costs.Update(smp)
	}
	if book := s.cfg.Costs; book != nil {
		// The book is a local SQLite file: a write is milliseconds, and keeping it under the lock keeps the
		// stored model the newest.
		if err := book.SaveCosts(context.Background(), s.cost.costs); err != nil {
			s.cfg.Logger.Warn("store engine costs", "key", s.cost.info.Key.String(), "err", err)
		}
	}
}

// noteRelaunch keeps a relaunch's duration for the engine it started, which is read when first seen ready.
func (s *Service) noteRelaunch(d time.Duration) {
	s.costMu.Lock()
	defer s.costMu.Unlock()
	if s.cost != nil && d > 0 {
		s.cost.relaunch = d
	}
}

// encodesOnCPU reports where the running engine encodes images.
func (s *Service) encodesOnCPU() bool {
	s.costMu.Lock()
	defer s.costMu.Unlock()
	return s.cost != nil && s.cost.info.EncodesOnCPU
}

// measuredTextRate is the running engine's measured prompt rate, 0 before one was measured: an encode is then
// charged the request's whole prompt time, an upper bound, rather than being reduced by another machine's rate.
func (s *Service) measuredTextRate() float64 {
	s.costMu.Lock()
	defer s.costMu.Unlock()
	if s.cost == nil {
		return 0
	}
	return s.cost.costs.MeasuredPrefillRate()
}

// imageTokens is how many prompt tokens an image takes in this engine.
func (s *Service) imageTokens(im tools.Image) int {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(im.Data))
	if err != nil {
		return 256
	}
	if f := s.cfg.ImageTokens; f != nil {
		return f(cfg.Width, cfg.Height)
	}
	return swap.ImageTokens(cfg.Width, cfg.Height)
}

// tokensOf is how many prompt tokens ims take.
func (s *Service) tokensOf(ims []tools.Image) int {
	n := 0
	for _, im := range ims {
		n += s.imageTokens(im)
	}
	return n
}

// evalSample is what one evaluation's timings measure (swap.EvalSample) on the running engine.
func (s *Service) evalSample(tm *engine.Timings, imageTokens int, text float64) swap.Sample {
	if tm == nil {
		return swap.Sample{}
	}
	return swap.EvalSample(tm.PromptN, tm.PromptMS, imageTokens, text, s.encodesOnCPU())
}
