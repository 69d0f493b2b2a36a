package session_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testkit"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// TestAFailedFirstTurnLeavesNoSession sends a new session's first message to an engine nobody listens on (a
// closed port, as a mistyped --endpoint is): the turn fails, the result says nothing was stored, and neither the
// store nor the session list has a session for it. A chat opened and closed without a message leaves none either.
func TestAFailedFirstTurnLeavesNoSession(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	svc, err := session.New(session.Config{Store: st, Agent: session.AgentConfig{Tools: tools.NewRegistry()},
		Engine: testkit.FixedEngine{R: conductor.Ready{Client: engine.NewClient("http://127.0.0.1:9", ""), Generation: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Turn(ctx, "hello there", nil, nil)
	if err == nil {
		t.Fatal("a turn against a closed port succeeded")
	}
	if res.Stored || sess.Status().Stored || res.Stats.Answered {
		t.Fatalf("a turn the engine never answered: stored %v, status %+v, stats %+v", res.Stored, sess.Status(), res.Stats)
	}
	if len(sess.History()) != 0 {
		t.Fatalf("the failed turn stayed in the conversation: %+v", sess.History())
	}
	idle, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	idle.Close()
	sess.Close()
	rows, err := st.ListSessions(ctx, memory.SessionFilter{})
	if err != nil || len(rows) != 0 {
		t.Fatalf("the store has %d sessions (%v), want none: %+v", len(rows), err, rows)
	}
	list, err := svc.Sessions(ctx, session.ListOptions{})
	if err != nil || len(list) != 0 {
		t.Fatalf("Sessions: %+v %v, want none", list, err)
	}
}

// answerAgent answers every turn and prefills without a server; it stands in for the model where the test is
// about what is stored, not what the model says.
type answerAgent struct {
	mu       sync.Mutex
	prefills int
}

func (a *answerAgent) Run(ctx context.Context, history []agent.Message, user agent.Message, emit func(agent.Event)) agent.Finished {
	emit(agent.Token{Text: "ok"})
	answer := agent.Message{Role: "assistant", Content: "ok", Timings: &engine.Timings{PromptN: 20, PredictedN: 3, PredictedPerSecond: 30}}
	emit(agent.StepFinished{Step: 1, Messages: []agent.Message{user, answer}})
	return agent.Finished{Final: answer, Steps: 1, Reason: "answer"}
}

func (a *answerAgent) Prefill(context.Context, []agent.Message, agent.Message) (*engine.Timings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prefills++
	return &engine.Timings{PromptN: 40, PromptMS: 10}, nil
}

// TestSessionIsStoredWithItsFirstAnswer: a new session's row is made when the engine first answers, titled after
// the first message (cut to one line without breaking a character), with what happened before it (the attached
// image's prefill) written with it; the session is then listed, and an old empty row is not.
func TestSessionIsStoredWithItsFirstAnswer(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	if _, err := st.CreateSession(ctx, memory.Session{Title: "left empty by an older visor"}); err != nil {
		t.Fatal(err)
	}
	a := &answerAgent{}
	svc := testkit.FakeService(t, a, func(c *session.Config) { c.Store = st })
	sess, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Attach(ctx, testkit.PNG(t, 8, 8)); err != nil {
		t.Fatal(err)
	}
	if err := sess.WaitAhead(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Session(ctx, sess.ID()); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("before any answer the session is in the store (%v)", err)
	}
	text := strings.Repeat("👨‍👩‍👧 what is on this screen ", 5)
	res, err := sess.Turn(ctx, text, nil, nil)
	if err != nil || !res.Stored || !res.Stats.Answered || res.Stats.Generated != 3 {
		t.Fatalf("turn: %+v %v", res, err)
	}
	row, err := st.Session(ctx, sess.ID())
	if err != nil {
		t.Fatal(err)
	}
	if row.Title != session.Title(text) || !utf8.ValidString(row.Title) || utf8.RuneCountInString(row.Title) > 3*session.TitleRunes ||
		!strings.HasSuffix(row.Title, "…") || row.MessageCount != 2 {
		t.Fatalf("stored row %+v", row)
	}
	evs, err := st.EngineEvents(ctx, sess.ID(), 100)
	if err != nil {
		t.Fatal(err)
	}
	prefilled := false
	for _, e := range evs {
		prefilled = prefilled || e.Kind == memory.EnginePrefill
	}
	if !prefilled || a.prefills != 1 {
		t.Fatalf("the prefill before the first answer is not stored with the row (%d prefills): %+v", a.prefills, evs)
	}
	list, err := svc.Sessions(ctx, session.ListOptions{})
	if err != nil || len(list) != 1 || list[0].ID != sess.ID() || list[0].Title != row.Title || list[0].Messages != 2 {
		t.Fatalf("Sessions: %+v %v, want this session alone (not the empty row)", list, err)
	}
	if st := sess.Status(); !st.Stored || st.Title != row.Title || st.Stats.ContextUsed != 23 || st.Stats.TokensPerSecond != 30 {
		t.Fatalf("status %+v", st)
	}
}

// TestSessionsWithoutAStore lists this process's conversations that have a message, titled after their first.
func TestSessionsWithoutAStore(t *testing.T) {
	ctx := context.Background()
	svc := testkit.FakeService(t, &answerAgent{}, nil)
	used, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer used.Close()
	unused, err := svc.Open(ctx, session.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	if _, err := used.Turn(ctx, "first\nmessage", nil, nil); err != nil {
		t.Fatal(err)
	}
	list, err := svc.Sessions(ctx, session.ListOptions{})
	if err != nil || len(list) != 1 || list[0].ID != used.ID() || list[0].Title != "first message" {
		t.Fatalf("Sessions: %+v %v", list, err)
	}
	if st := svc.Status(); st.Resident == nil {
		t.Fatalf("engine status %+v: Resident must be a list for the page's JSON", st)
	}
}

// TestEngineStatusFromProps: the service's engine status comes from the ready engine's /props (a real
// llama-server), so no front end reads them itself; before a launch it has the model's label alone.
func TestEngineStatusFromProps(t *testing.T) {
	ctx := context.Background()
	srv := enginetest.Tiny(t, false, llamacpp.Config{Ctx: 1024})
	svc := testkit.Service(t, srv, nil, func(c *session.Config) { c.Model = "tiny" })
	if st := svc.Status(); st.Model != "tiny" || st.ContextSize != 0 || len(st.Resident) != 0 {
		t.Fatalf("before the engine is ready: %+v", st)
	}
	if err := svc.EnsureReady(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := llamacpp.ReadProps(ctx, testkit.ReadyOf(srv).Client)
	if err != nil {
		t.Fatal(err)
	}
	if st := svc.Status(); st.Model != "tiny" || st.ContextSize != p.NCtx || st.ContextSize == 0 || len(st.Resident) != 0 {
		t.Fatalf("ready: %+v, want the server's context %d and nothing resident beside a text model", st, p.NCtx)
	}
}
