package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "visor.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newSession(t testing.TB, s *Store, sess Session) Session {
	t.Helper()
	sess, err := s.CreateSession(context.Background(), sess)
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func pngBytes(t testing.TB, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White}), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpLossless builds a VP8L header for a w×h image followed by filler: enough for the size to be read.
func webpLossless(w, h int) []byte {
	payload := make([]byte, 5, 16)
	payload[0] = 0x2f
	binary.LittleEndian.PutUint32(payload[1:], uint32(w-1)|uint32(h-1)<<14)
	payload = append(payload, 1, 2, 3, 4, 5, 6, 7)
	var b []byte
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(4+8+len(payload)))
	b = append(b, "WEBPVP8L"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestRoundTripEveryField(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	created := time.Date(2025, 11, 30, 9, 0, 0, 123e6, time.UTC)
	sess := newSession(t, s, Session{Title: "fix the build", Agent: "coder", Model: "qwen3-8b", EngineProfile: "mtp", CreatedAt: created})
	if sess.ID == "" || !sess.CreatedAt.Equal(created) {
		t.Fatalf("created session = %+v", sess)
	}
	png1 := pngBytes(t, 3, 2, color.White)
	webp := webpLossless(7, 9)
	at := time.Date(2025, 11, 30, 9, 1, 2, 345e6, time.UTC)
	want := []Message{
		{Role: "system", Content: "You are terse.", CreatedAt: at},
		{Role: "user", Content: "what is in these?", Images: []Image{{Data: png1}, {Data: webp}, {Data: png1}}, CreatedAt: at},
		{Role: "assistant", Content: "Let me look.", Reasoning: "two images, one twice", FinishReason: "tool_calls",
			ToolCalls: []ToolCall{
				{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path": "a.go",  "n": 1}`)},
				{ID: "call_2", Name: "shell", Arguments: json.RawMessage(`{"cmd": "ls`)}, // broken JSON, kept verbatim
			},
			Timings: &Timings{PromptTokens: 812, CachedTokens: 512, GeneratedTokens: 41, PromptPerSecond: 1503.25,
				TokensPerSecond: 87.5, DraftTokens: 30, DraftAccepted: 22, TimeToFirstToken: 231456 * time.Microsecond,
				Duration: 1700250 * time.Microsecond},
			CreatedAt: at},
		{Role: "tool", ToolCallID: "call_1", ToolName: "read_file", Content: "package main", CreatedAt: at},
		{Role: "tool", ToolCallID: "call_2", ToolName: "shell", Content: "", Interrupted: true, CreatedAt: at},
	}
	runs := []ToolRun{
		{CallID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path": "a.go",  "n": 1}`), Result: "package main",
			Duration: 1500 * time.Microsecond, StartedAt: at},
		{CallID: "call_2", Name: "shell", Arguments: json.RawMessage(`{"cmd": "ls`), Error: "bad arguments", StartedAt: at},
	}
	if err := s.AppendStep(ctx, sess.ID, Step{Messages: want[:2]}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendStep(ctx, sess.ID, Step{Messages: want[2:], ToolRuns: runs}); err != nil {
		t.Fatal(err)
	}

	// Reopen: everything must come from the file.
	path := s.Path()
	s.Close()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got, err := s.Messages(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		w := want[i]
		w.ID, w.SessionID = got[i].ID, sess.ID
		w.Images = nil
		for _, img := range want[i].Images {
			w.Images = append(w.Images, img)
		}
		for j := range w.Images {
			w.Images[j].SHA256 = hexSum(w.Images[j].Data)
		}
		g := got[i]
		if len(g.Images) != len(w.Images) {
			t.Fatalf("message %d: %d images, want %d", i, len(g.Images), len(w.Images))
		}
		for j := range g.Images {
			if !bytes.Equal(g.Images[j].Data, w.Images[j].Data) || g.Images[j].SHA256 != w.Images[j].SHA256 {
				t.Errorf("message %d image %d: bytes or sha256 differ", i, j)
			}
		}
		g.Images, w.Images = nil, nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("message %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if !bytes.Equal(got[2].ToolCalls[0].Arguments, want[2].ToolCalls[0].Arguments) {
		t.Errorf("arguments not byte-identical: %s", got[2].ToolCalls[0].Arguments)
	}
	imgs := got[1].Images
	if imgs[0].MIME != "image/png" || imgs[0].Width != 3 || imgs[0].Height != 2 {
		t.Errorf("png image = %s %dx%d", imgs[0].MIME, imgs[0].Width, imgs[0].Height)
	}
	if imgs[1].MIME != "image/webp" || imgs[1].Width != 7 || imgs[1].Height != 9 {
		t.Errorf("webp image = %s %dx%d", imgs[1].MIME, imgs[1].Width, imgs[1].Height)
	}
	var blobs int
	if err := s.db.QueryRow(`SELECT count(*) FROM blobs`).Scan(&blobs); err != nil || blobs != 2 {
		t.Errorf("blobs = %d (%v), want 2: the repeated image is stored once", blobs, err)
	}

	gotRuns, err := s.ToolRuns(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(gotRuns) != 2 {
		t.Fatalf("got %d tool runs", len(gotRuns))
	}
	for i := range runs {
		w := runs[i]
		w.ID, w.SessionID, w.MessageID = gotRuns[i].ID, sess.ID, got[len(got)-1].ID
		if !reflect.DeepEqual(gotRuns[i], w) {
			t.Errorf("tool run %d:\n got %+v\nwant %+v", i, gotRuns[i], w)
		}
	}

	gs, err := s.Session(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if gs.Title != "fix the build" || gs.Agent != "coder" || gs.Model != "qwen3-8b" || gs.EngineProfile != "mtp" ||
		gs.PromptTokens != 812 || gs.CachedTokens != 512 || gs.GeneratedTokens != 41 || gs.MessageCount != 5 ||
		!gs.CreatedAt.Equal(created) || gs.UpdatedAt.Before(created) {
		t.Errorf("session = %+v", gs)
	}
}

func TestImagesByteIdenticalAfterResume(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	sess := newSession(t, s, Session{})
	cases := []struct {
		data          []byte
		mime          string
		width, height int
	}{
		{pngBytes(t, 17, 5, color.Black), "image/png", 17, 5},
		{jpegBytes(t, 8, 24), "image/jpeg", 8, 24},
		{gifBytes(t, 4, 6), "image/gif", 4, 6},
		{webpLossless(640, 480), "image/webp", 640, 480},
		{[]byte("\x00\x01 not an image \xff"), "application/octet-stream", 0, 0},
	}
	var images []Image
	for _, c := range cases {
		images = append(images, Image{Data: c.data})
	}
	if err := s.AppendStep(ctx, sess.ID, Step{Messages: []Message{{Role: "user", Images: images}}}); err != nil {
		t.Fatal(err)
	}
	// A later message can refer to a stored image by hash alone.
	ref := Image{SHA256: strings.ToUpper(hexSum(cases[0].data))}
	if err := s.AppendStep(ctx, sess.ID, Step{Messages: []Message{{Role: "user", Images: []Image{ref}}}}); err != nil {
		t.Fatal(err)
	}
	err := s.AppendStep(ctx, sess.ID, Step{Messages: []Message{{Role: "user", Images: []Image{{SHA256: hexSum([]byte("x"))}}}}})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown image hash: err = %v, want ErrNotFound", err)
	}
	err = s.AppendStep(ctx, sess.ID, Step{Messages: []Message{{Role: "user", Images: []Image{{SHA256: hexSum([]byte("x")), Data: []byte("y")}}}}})
	if !errors.Is(err, ErrInvalidInput) {
		t.Errorf("mismatched hash: err = %v, want ErrInvalidInput", err)
	}

	msgs, err := s.Messages(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 {
		t.Fatalf("got %d messages; failed steps must leave nothing", len(msgs))
	}
	for i, c := range cases {
		img := msgs[0].Images[i]
		if !bytes.Equal(img.Data, c.data) {
			t.Errorf("image %d: bytes differ", i)
		}
		if img.MIME != c.mime || img.Width != c.width || img.Height != c.height {
			t.Errorf("image %d: %s %dx%d, want %s %dx%d", i, img.MIME, img.Width, img.Height, c.mime, c.width, c.height)
		}
	}
	if !bytes.Equal(msgs[1].Images[0].Data, cases[0].data) {
		t.Error("image referenced by hash: bytes differ")
	}
}

func appendText(t testing.TB, s *Store, sessionID string, msgs ...Message) []int64 {
	t.Helper()
	ctx := context.Background()
	if err := s.AppendStep(ctx, sessionID, Step{Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	all, err := ownMessages(ctx, s.db, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, m := range all[len(all)-len(msgs):] {
		ids = append(ids, m.ID)
	}
	return ids
}

func contents(msgs []Message) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, m.Content)
	}
	return strings.Join(parts, ",")
}

func TestForkAndContinuation(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	root := newSession(t, s, Session{Title: "root", Agent: "coder"})
	img := pngBytes(t, 2, 2, color.White)
	ids := appendText(t, s, root.ID, Message{Role: "user", Content: "a", Images: []Image{{Data: img}}}, Message{Role: "assistant", Content: "b"})
	ids = append(ids, appendText(t, s, root.ID, Message{Role: "user", Content: "c"}, Message{Role: "assistant", Content: "d"})...)

	fork, err := s.Fork(ctx, root.ID, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	if fork.ParentID != root.ID || fork.LinkKind != LinkFork || fork.InheritTo != ids[1] || fork.Agent != "coder" {
		t.Errorf("fork = %+v", fork)
	}
	appendText(t, s, fork.ID, Message{Role: "user", Content: "x"})
	got, err := s.Messages(ctx, fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := contents(got); c != "a,b,x" {
		t.Errorf("fork history = %s, want a,b,x", c)
	}
	if !bytes.Equal(got[0].Images[0].Data, img) || got[0].SessionID != root.ID {
		t.Error("fork must read the parent's message, images included, in place")
	}
	// Nothing was copied.
	var n int
	s.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&n)
	if n != 5 {
		t.Errorf("messages in file = %d, want 5 (no copies)", n)
	}
	// The parent keeps going, the fork does not see it.
	appendText(t, s, root.ID, Message{Role: "user", Content: "e"})
	got, _ = s.Messages(ctx, fork.ID)
	if c := contents(got); c != "a,b,x" {
		t.Errorf("fork history after parent grew = %s", c)
	}

	// A fork of a fork, at an inherited message.
	fork2, err := s.Fork(ctx, fork.ID, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, s, fork2.ID, Message{Role: "assistant", Content: "y"})
	got, _ = s.Messages(ctx, fork2.ID)
	if c := contents(got); c != "a,y" {
		t.Errorf("fork of fork = %s, want a,y", c)
	}
	if _, err := s.Fork(ctx, fork.ID, ids[2]); !errors.Is(err, ErrNotFound) {
		t.Errorf("fork at a message outside the history: err = %v, want ErrNotFound", err)
	}

	// Continuation after compaction: summary, then the kept tail, then its own.
	cont, err := s.CreateLinkedSession(ctx, root.ID, Message{Role: "user", Content: "S"}, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	appendText(t, s, cont.ID, Message{Role: "assistant", Content: "z"})
	got, _ = s.Messages(ctx, cont.ID)
	if c := contents(got); c != "S,c,d,e,z" {
		t.Errorf("continuation = %s, want S,c,d,e,z", c)
	}
	cont2, err := s.CreateLinkedSession(ctx, cont.ID, Message{Role: "user", Content: "S2"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Messages(ctx, cont2.ID)
	if c := contents(got); c != "S2" {
		t.Errorf("continuation keeping nothing = %s, want S2", c)
	}
	if cont.LinkKind != LinkContinuation {
		t.Errorf("link kind = %q", cont.LinkKind)
	}

	// Deleting: refused while others inherit, cascades on request, images collected when unreferenced.
	if _, err := s.DeleteSession(ctx, root.ID, false); !errors.Is(err, ErrHasForks) {
		t.Fatalf("delete with forks: err = %v, want ErrHasForks", err)
	}
	deleted, err := s.DeleteSession(ctx, fork2.ID, false)
	if err != nil || len(deleted) != 1 {
		t.Fatalf("delete leaf: %v %v", deleted, err)
	}
	deleted, err = s.DeleteSession(ctx, root.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 4 {
		t.Errorf("cascade deleted %v, want root, fork, and two continuations", deleted)
	}
	for _, table := range []string{"sessions", "messages", "blobs", "message_images", "tool_calls", "search_fts"} {
		s.db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n)
		if n != 0 {
			t.Errorf("%s has %d rows after deleting everything", table, n)
		}
	}
}

func TestDeleteKeepsSharedImages(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	img := pngBytes(t, 5, 5, color.Black)
	a := newSession(t, s, Session{})
	b := newSession(t, s, Session{})
	appendText(t, s, a.ID, Message{Role: "user", Images: []Image{{Data: img}}})
	appendText(t, s, b.ID, Message{Role: "user", Images: []Image{{Data: img}}})
	if _, err := s.DeleteSession(ctx, a.ID, false); err != nil {
		t.Fatal(err)
	}
	got, err := s.Messages(ctx, b.ID)
	if err != nil || !bytes.Equal(got[0].Images[0].Data, img) {
		t.Fatalf("image shared with a deleted session is gone: %v", err)
	}
	if _, err := s.DeleteSession(ctx, b.ID, false); err != nil {
		t.Fatal(err)
	}
	var n int
	s.db.QueryRow(`SELECT count(*) FROM blobs`).Scan(&n)
	if n != 0 {
		t.Errorf("blobs = %d after the last user went", n)
	}
	if _, err := s.DeleteSession(ctx, b.ID, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting twice: %v", err)
	}
}

func TestTurnsMarkInterruptions(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	sess := newSession(t, s, Session{})
	if _, err := s.BeginTurn(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	appendText(t, s, sess.ID, Message{Role: "user", Content: "one"}, Message{Role: "assistant", Content: "done"})
	if err := s.EndTurn(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	// A turn whose process dies after one step.
	s.BeginTurn(ctx, sess.ID)
	appendText(t, s, sess.ID, Message{Role: "user", Content: "two"}, Message{Role: "assistant", Content: "calling"})
	if got, _ := s.Session(ctx, sess.ID); !got.OpenTurn {
		t.Error("session should report an open turn")
	}
	n, err := s.BeginTurn(ctx, sess.ID) // the next process
	if err != nil || n != 1 {
		t.Fatalf("BeginTurn recovered %d (%v), want 1", n, err)
	}
	appendText(t, s, sess.ID, Message{Role: "user", Content: "three"})
	if err := s.MarkInterrupted(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	msgs, _ := s.Messages(ctx, sess.ID)
	var marked []string
	for _, m := range msgs {
		if m.Interrupted {
			marked = append(marked, m.Content)
		}
	}
	if strings.Join(marked, ",") != "calling,three" {
		t.Errorf("interrupted messages = %v, want [calling three]", marked)
	}
	if got, _ := s.Session(ctx, sess.ID); got.OpenTurn {
		t.Error("no turn should be open")
	}
	if _, err := s.BeginTurn(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("BeginTurn on unknown session: %v", err)
	}
	if err := s.AppendStep(ctx, "nope", Step{Messages: []Message{{Role: "user"}}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("AppendStep on unknown session: %v", err)
	}
}

func TestEngineEvents(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	sess := newSession(t, s, Session{})
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	evs := []EngineEvent{
		{Kind: EngineStart, At: at, Duration: 2500 * time.Millisecond, Detail: json.RawMessage(`{"model":"q.gguf"}`)},
		{SessionID: sess.ID, Kind: EngineSwap, At: at.Add(time.Second), Duration: 900 * time.Millisecond, Detail: json.RawMessage(`{"from":"mtp","to":"vision"}`)},
		{SessionID: sess.ID, Kind: EngineCrash, At: at.Add(2 * time.Second)},
	}
	for _, ev := range evs {
		if _, err := s.RecordEngineEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RecordEngineEvent(ctx, EngineEvent{Kind: EngineStop, SessionID: "missing"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("event for unknown session: %v", err)
	}
	all, err := s.EngineEvents(ctx, "", 0)
	if err != nil || len(all) != 3 {
		t.Fatalf("all events: %d %v", len(all), err)
	}
	for i := range evs {
		w := evs[i]
		w.ID = all[i].ID
		if !reflect.DeepEqual(all[i], w) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, all[i], w)
		}
	}
	mine, _ := s.EngineEvents(ctx, sess.ID, 1)
	if len(mine) != 1 || mine[0].Kind != EngineCrash {
		t.Errorf("last event of the session = %+v", mine)
	}
}

func TestSearchRankingAndFilters(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a := newSession(t, s, Session{Title: "alpha", Agent: "coder"})
	b := newSession(t, s, Session{Title: "beta", Agent: "writer"})
	day1 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	day2 := day1.AddDate(0, 0, 1)
	appendText(t, s, a.ID,
		Message{Role: "user", Content: "the segfault in the parser again", CreatedAt: day1},
		Message{Role: "assistant", Content: "segfault segfault segfault: parser dereferences nil", CreatedAt: day1},
		Message{Role: "assistant", Content: "nothing relevant here", Reasoning: "maybe a segfault", CreatedAt: day2},
	)
	appendText(t, s, b.ID, Message{Role: "user", Content: "a segfault in a poem", CreatedAt: day2})
	big := strings.Repeat("filler ", MaxIndexedToolText/7) + " needleafterthecap"
	err := s.AppendStep(ctx, a.ID, Step{
		Messages: []Message{{Role: "tool", ToolCallID: "c1", Content: "build failed: undefined: fooBar " + big, CreatedAt: day2}},
		ToolRuns: []ToolRun{
			{CallID: "c1", Name: "shell", Result: "build failed: undefined: fooBar " + big, StartedAt: day2},
			{CallID: "c2", Name: "fetch", Error: "dial tcp: connection refused", StartedAt: day2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}

	hits, err := s.Search(ctx, Query{Text: "segfault"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 4 {
		t.Fatalf("segfault: %d hits, want 4: %+v", len(hits), hits)
	}
	if !strings.Contains(hits[0].Snippet, "[segfault]") || hits[0].Role != "assistant" || hits[0].SessionTitle != "alpha" {
		t.Errorf("best hit = %+v, want the message saying segfault three times", hits[0])
	}
	if last := hits[len(hits)-1]; !strings.Contains(last.Snippet, "maybe") {
		t.Errorf("worst hit = %+v, want the reasoning-only match (weighted lower)", last)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i].Rank < hits[i-1].Rank {
			t.Errorf("hits not ordered by rank: %v then %v", hits[i-1].Rank, hits[i].Rank)
		}
	}

	count := func(q Query) int {
		t.Helper()
		q.Text = "segfault"
		h, err := s.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return len(h)
	}
	if n := count(Query{SessionID: b.ID}); n != 1 {
		t.Errorf("session filter: %d", n)
	}
	if n := count(Query{Agent: "coder"}); n != 3 {
		t.Errorf("agent filter: %d", n)
	}
	if n := count(Query{Role: "user"}); n != 2 {
		t.Errorf("role filter: %d", n)
	}
	if n := count(Query{Since: day2}); n != 2 {
		t.Errorf("since filter: %d", n)
	}
	if n := count(Query{Until: day2}); n != 2 {
		t.Errorf("until filter: %d", n)
	}
	if n := count(Query{Limit: 1}); n != 1 {
		t.Errorf("limit: %d", n)
	}

	// A failed run whose error is also its tool message: one hit, not two.
	err = s.AppendStep(ctx, a.ID, Step{
		Messages: []Message{{Role: "tool", ToolCallID: "c3", Content: "permission denied: /etc/shadow"}},
		ToolRuns: []ToolRun{{CallID: "c3", Name: "read_file", Result: "permission denied: /etc/shadow", Error: "permission denied: /etc/shadow"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if hits, _ := s.Search(ctx, Query{Text: "shadow"}); len(hits) != 1 {
		t.Errorf("shadow: %d hits, want 1: %+v", len(hits), hits)
	}

	// Tool output: the duplicate of the tool message is not indexed twice; the error-only run is.
	hits, _ = s.Search(ctx, Query{Text: "fooBar"})
	if len(hits) != 1 || hits[0].MessageID == 0 {
		t.Errorf("fooBar: %+v, want only the tool message", hits)
	}
	hits, _ = s.Search(ctx, Query{Text: "connection refused"})
	if len(hits) != 1 || hits[0].ToolRunID == 0 || hits[0].Role != "tool" {
		t.Errorf("tool error: %+v, want the tool run", hits)
	}
	if hits, _ = s.Search(ctx, Query{Text: "needleafterthecap"}); len(hits) != 0 {
		t.Errorf("text past the index cap was indexed: %+v", hits)
	}
	// Stemming: "dereference" finds "dereferences".
	if hits, _ = s.Search(ctx, Query{Text: "dereference"}); len(hits) != 1 {
		t.Errorf("stemmed search: %d hits", len(hits))
	}
}

func TestSearchQuerySafety(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	sess := newSession(t, s, Session{})
	appendText(t, s, sess.ID, Message{Role: "user", Content: `run foo-bar with "quotes" AND (parens) col:umn NEAR x*`})
	for _, q := range []string{`foo-bar`, `"quotes`, `quotes"`, `AND`, `(parens`, `col:umn`, `NEAR`, `x*`, `foo* "`, `'`, `^foo`} {
		// Punctuation-only input is a (typed) empty query; nothing may reach SQLite as broken syntax.
		if _, err := s.Search(ctx, Query{Text: q}); err != nil && !(q == "'" && errors.Is(err, ErrBadQuery)) {
			t.Errorf("query %q: %v", q, err)
		}
	}
	if hits, _ := s.Search(ctx, Query{Text: "foo-bar"}); len(hits) != 1 {
		t.Errorf("foo-bar: %d hits", len(hits))
	}
	if hits, _ := s.Search(ctx, Query{Text: "fo*"}); len(hits) != 1 {
		t.Errorf("prefix: %d hits", len(hits))
	}
	if _, err := s.Search(ctx, Query{Text: `" * -`}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("query of punctuation only: %v, want ErrBadQuery", err)
	}
	if hits, err := s.Search(ctx, Query{Text: `quotes OR nonexistent`, Raw: true}); err != nil || len(hits) != 1 {
		t.Errorf("raw OR: %d %v", len(hits), err)
	}
	if hits, _ := s.Search(ctx, Query{Text: `quotes OR nonexistent`}); len(hits) != 0 {
		t.Errorf("OR must be a plain word without Raw: %d hits", len(hits))
	}
	if _, err := s.Search(ctx, Query{Text: `"unterminated`, Raw: true}); !errors.Is(err, ErrBadQuery) {
		t.Errorf("raw syntax error: %v, want ErrBadQuery", err)
	}
}

func TestOpenCreatesDirAndOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b", "c?d#e%f")
	s, err := Open(context.Background(), filepath.Join(dir, "v.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, "v.db")); err != nil {
		t.Fatalf("database not at the path given: %v", err)
	}
	st, err := os.Stat(filepath.Join(dir, "v.db"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("database file mode = %v (%v), want 0600: conversations are private", st.Mode().Perm(), err)
	}
	var mode string
	var fk, sync, busy int
	s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	s.db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk)
	s.db.QueryRow(`PRAGMA synchronous`).Scan(&sync)
	s.db.QueryRow(`PRAGMA busy_timeout`).Scan(&busy)
	if mode != "wal" || fk != 1 || sync != 2 || busy != 10000 {
		t.Errorf("journal_mode=%s foreign_keys=%d synchronous=%d busy_timeout=%d, want wal 1 2(FULL) 10000", mode, fk, sync, busy)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	if p, _ := DefaultPath(); p != "/data/visor/visor.db" {
		t.Errorf("with XDG_DATA_HOME: %s", p)
	}
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if p, _ := DefaultPath(); p != "/home/u/.local/share/visor/visor.db" {
		t.Errorf("without XDG_DATA_HOME: %s", p)
	}
}

func TestMigrationsFromEmptyAndFromVersion1(t *testing.T) {
	ctx := context.Background()
	migs, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) < 2 {
		t.Fatal("want at least two migrations so the upgrade path is exercised")
	}
	latest := migs[len(migs)-1].version

	// From an empty (zero-byte) file.
	empty := filepath.Join(t.TempDir(), "empty.db")
	os.WriteFile(empty, nil, 0o600)
	s, err := Open(ctx, empty)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := s.schemaVersion(ctx); v != latest {
		t.Errorf("fresh file at version %d, want %d", v, latest)
	}
	s.Close()

	// A file made by a version-1 visor, with data in it.
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite3", path+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	old := &Store{db: db, path: path, logger: s.logger}
	if err := old.migrate(ctx, migs, 1); err != nil {
		t.Fatal(err)
	}
	// Version 1 made the search index; the store makes it now (index.go).
	if err := old.ensureIndex(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('old', 'from v1', 1000, 2000)`,
		`INSERT INTO messages (session_id, role, content, has_timings, generated_tokens, tokens_per_second, created_at)
			VALUES ('old', 'assistant', 'kept across upgrades', 1, 7, 12.5, 1500)`,
		`INSERT INTO search_fts (rowid, body, reasoning, session_id, role, created_at)
			VALUES (last_insert_rowid(), 'kept across upgrades', '', 'old', 'assistant', 1500)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("upgrade from version 1: %v", err)
	}
	defer s.Close()
	if v, _ := s.schemaVersion(ctx); v != latest {
		t.Errorf("upgraded file at version %d, want %d", v, latest)
	}
	msgs, err := s.Messages(ctx, "old")
	if err != nil || len(msgs) != 1 {
		t.Fatalf("old messages: %v %v", msgs, err)
	}
	if m := msgs[0]; m.Content != "kept across upgrades" || m.Timings == nil || m.Timings.GeneratedTokens != 7 || m.Timings.PromptPerSecond != 0 {
		t.Errorf("old message = %+v %+v", m, m.Timings)
	}
	// The new column works on the upgraded file.
	appendText(t, s, "old", Message{Role: "assistant", Timings: &Timings{PromptPerSecond: 99.5}})
	msgs, _ = s.Messages(ctx, "old")
	if msgs[1].Timings.PromptPerSecond != 99.5 {
		t.Errorf("prompt_per_second after upgrade = %v", msgs[1].Timings.PromptPerSecond)
	}
	if hits, err := s.Search(ctx, Query{Text: "upgrades"}); err != nil || len(hits) != 1 {
		t.Errorf("search on upgraded file: %v %v", hits, err)
	}
}

func TestNewerSchemaIsRefusedUntouched(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "future.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE future (x); INSERT INTO future VALUES (1); PRAGMA user_version = 999`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, _ := os.ReadFile(path)

	_, err = Open(ctx, path)
	if !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("err = %v, want ErrNewerSchema", err)
	}
	for _, want := range []string{path, "999", "upgrade visor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("the newer file was modified")
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Error("a WAL was created for the newer file")
	}
}

func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junk.db")
	os.WriteFile(path, bytes.Repeat([]byte("not sqlite "), 1000), 0o600)
	_, err := Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want an error naming the file", err)
	}
}

func TestReadsDoNotWaitForWriters(t *testing.T) {
	ctx := context.Background()
	// A 1 ms busy timeout turns any wait for the write lock into an immediate SQLITE_BUSY, so the reads below
	// pass only if they never ask for it; no clock is read.
	s, err := OpenWithOptions(ctx, filepath.Join(t.TempDir(), "visor.db"), Options{BusyTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sess := newSession(t, s, Session{})
	appendText(t, s, sess.ID, Message{Role: "user", Content: "hello"})
	// Another writer holds the write lock (BEGIN IMMEDIATE) and is slow to commit.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if msgs, err := s.Messages(ctx, sess.ID); err != nil || len(msgs) != 1 {
		t.Fatalf("read during a write: %v %v", msgs, err)
	}
	if _, err := s.Search(ctx, Query{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Export(ctx, sess.ID, "json", &buf, ""); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentAppendsInOneProcess(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	sess := newSession(t, s, Session{})
	const writers, steps = 6, 15
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < steps; i++ {
				if err := s.AppendStep(ctx, sess.ID, Step{Messages: []Message{{Role: "user", Content: fmt.Sprintf("w%d-%d", w, i)}}}); err != nil {
					errs <- err
					return
				}
				if _, err := s.Messages(ctx, sess.ID); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	msgs, _ := s.Messages(ctx, sess.ID)
	if len(msgs) != writers*steps {
		t.Errorf("%d messages, want %d", len(msgs), writers*steps)
	}
}

func TestListAndUpdateSessions(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	old := newSession(t, s, Session{Title: "old", Agent: "coder", CreatedAt: time.Now().Add(-48 * time.Hour)})
	mid := newSession(t, s, Session{Title: "mid", Agent: "writer", CreatedAt: time.Now().Add(-time.Hour)})
	appendText(t, s, old.ID, Message{Role: "user", Content: "x"}) // now the most recent
	time.Sleep(5 * time.Millisecond)                              // times are milliseconds; no ties
	fork, err := s.Fork(ctx, old.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(f SessionFilter) string {
		t.Helper()
		list, err := s.ListSessions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range list {
			out = append(out, x.Title+"/"+x.LinkKind)
		}
		return strings.Join(out, ",")
	}
	if got := ids(SessionFilter{}); got != "old/fork,old/,mid/" {
		t.Errorf("all = %s", got)
	}
	if got := ids(SessionFilter{Agent: "writer"}); got != "mid/" {
		t.Errorf("agent = %s", got)
	}
	if got := ids(SessionFilter{ParentID: old.ID}); got != "old/fork" {
		t.Errorf("children = %s", got)
	}
	if got := ids(SessionFilter{Since: time.Now().Add(-time.Minute)}); got != "old/fork,old/" {
		t.Errorf("since = %s", got)
	}
	if got := ids(SessionFilter{Limit: 1}); got != "old/fork" {
		t.Errorf("limit = %s", got)
	}
	if err := s.UpdateSession(ctx, Session{ID: mid.ID, Title: "renamed", Agent: "writer", Model: "m2", EngineProfile: "vision"}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Session(ctx, mid.ID)
	if got.Title != "renamed" || got.Model != "m2" || got.EngineProfile != "vision" || !got.UpdatedAt.After(mid.UpdatedAt) {
		t.Errorf("updated = %+v", got)
	}
	if err := s.UpdateSession(ctx, Session{ID: "missing"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("update missing: %v", err)
	}
	if _, err := s.CreateSession(ctx, Session{ID: fork.ID}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate id: %v", err)
	}
	if _, err := s.CreateSession(ctx, Session{ParentID: old.ID}); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("create with parent: %v", err)
	}
}
