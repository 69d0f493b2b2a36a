package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type greetIn struct {
	Name  string `json:"name" jsonschema_description:"Who to greet"`
	Tone  string `json:"tone,omitempty" jsonschema:"enum=warm,enum=formal,default=warm"`
	Times int    `json:"times,omitempty" jsonschema:"default=1,minimum=1,maximum=5"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

func greet(_ context.Context, in greetIn) (greetOut, error) {
	g := "Hi " + in.Name
	if in.Tone == "formal" {
		g = "Good day, " + in.Name
	}
	return greetOut{Greeting: strings.Repeat(g+"! ", in.Times)}, nil
}

func newTestRegistry(t *testing.T, opts ...RegistryOption) *Registry {
	t.Helper()
	r := NewRegistry(append([]RegistryOption{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err := r.Register(New("greet", "Greets someone.", greet, Parallel())); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSchemaFromTags(t *testing.T) {
	t.Parallel()
	spec := New("greet", "d", greet).Spec()
	var s struct {
		Type                 string   `json:"type"`
		Required             []string `json:"required"`
		AdditionalProperties *bool    `json:"additionalProperties"`
		Properties           map[string]struct {
			Type        string   `json:"type"`
			Description string   `json:"description"`
			Enum        []any    `json:"enum"`
			Default     any      `json:"default"`
			Minimum     *float64 `json:"minimum"`
		} `json:"properties"`
		Schema string `json:"$schema"`
	}
	if err := json.Unmarshal(spec.Parameters, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || s.Schema != "" {
		t.Errorf("type=%q $schema=%q, want object and no $schema", s.Type, s.Schema)
	}
	if len(s.Required) != 1 || s.Required[0] != "name" {
		t.Errorf("required = %v, want [name]", s.Required)
	}
	if s.AdditionalProperties == nil || *s.AdditionalProperties {
		t.Errorf("additionalProperties should be false")
	}
	if got := s.Properties["name"].Description; got != "Who to greet" {
		t.Errorf("description = %q", got)
	}
	if got := s.Properties["tone"]; len(got.Enum) != 2 || got.Default != "warm" {
		t.Errorf("tone = %+v, want enum of 2 and default warm", got)
	}
	if got := s.Properties["times"]; got.Type != "integer" || got.Default != float64(1) || got.Minimum == nil {
		t.Errorf("times = %+v", got)
	}
}

func TestNonStructInputRejectedAtRegister(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	err := r.Register(New("bad", "d", func(context.Context, string) (string, error) { return "", nil }))
	if !errors.Is(err, ErrNotStruct) {
		t.Fatalf("err = %v, want ErrNotStruct", err)
	}
}

func TestRegisterRejectsDuplicatesAndBadNames(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	if err := r.Register(New("greet", "again", greet)); !errors.Is(err, ErrDuplicate) {
		t.Errorf("duplicate: err = %v", err)
	}
	if err := r.Register(New("has space", "d", greet)); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: err = %v", err)
	}
}

func TestSpecsSortedAndStable(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	for _, n := range []string{"zeta", "alpha", "mid"} {
		if err := r.Register(New(n, "d", greet)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "alpha,mid,zeta" {
		t.Errorf("order = %v", names)
	}
	if _, ok := r.Get("mid"); !ok {
		t.Error("Get(mid) not found")
	}
	if !r.Unregister("mid") || r.Unregister("mid") {
		t.Error("Unregister should succeed once")
	}
	if _, ok := r.Get("mid"); ok || len(r.Specs()) != 2 {
		t.Error("mid still registered")
	}
	if res := r.Call(context.Background(), "mid", nil); !res.IsError || !strings.Contains(res.Text, "alpha, zeta") {
		t.Errorf("after Unregister: %+v", res)
	}
}

func TestCallAppliesDefaultsAndEncodesStruct(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	res := r.Call(context.Background(), "greet", json.RawMessage(`{"name":"Ada"}`))
	if res.IsError || res.Text != `{"greeting":"Hi Ada! "}` {
		t.Fatalf("got %+v", res)
	}
	res = r.Call(context.Background(), "greet", json.RawMessage(`{"name":"Ada","tone":"formal","times":2}`))
	if res.Text != `{"greeting":"Good day, Ada! Good day, Ada! "}` {
		t.Fatalf("got %+v", res)
	}
}

func TestCallToleratesStringWrappedAndEmptyArgs(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	type noArgs struct {
		Verbose bool `json:"verbose,omitempty"`
	}
	if err := r.Register(New("ping", "d", func(_ context.Context, in noArgs) (string, error) { return "pong", nil })); err != nil {
		t.Fatal(err)
	}
	once, _ := json.Marshal(`{"name":"Bo"}`)
	twice, _ := json.Marshal(string(once))
	for _, a := range []json.RawMessage{once, twice} {
		if res := r.Call(context.Background(), "greet", a); res.IsError || !strings.Contains(res.Text, "Hi Bo") {
			t.Errorf("string-wrapped %s: %+v", a, res)
		}
	}
	for _, a := range []string{``, `null`, `""`, ` {} `, `"null"`} {
		if res := r.Call(context.Background(), "ping", json.RawMessage(a)); res.IsError || res.Text != "pong" {
			t.Errorf("ping(%q) = %+v", a, res)
		}
	}
	res := r.Call(context.Background(), "greet", json.RawMessage(`null`))
	if !res.IsError || !strings.Contains(res.Text, `"name" is required`) {
		t.Errorf("greet(null) = %+v", res)
	}
}

func TestValidationMessages(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	cases := []struct {
		args string
		want []string
	}{
		{`{"name":3}`, []string{`field "name"`, "expected string, got integer 3"}},
		{`{}`, []string{`missing required field "name"`}},
		{`{"name":"a","tone":"angry"}`, []string{`field "tone"`, `"angry" is not allowed`, `["warm","formal"]`}},
		{`{"name":"a","times":"2"}`, []string{`field "times"`, "expected integer, got string"}},
		{`{"name":"a","times":9}`, []string{`field "times"`, "must be <= 5, got 9"}},
		{`{"name":"a","nmae":"b"}`, []string{`unknown field "nmae"`, `"name"`}},
		{`[1,2]`, []string{"must be a JSON object, got array"}},
		{`{"name":`, []string{"not valid JSON"}},
	}
	for _, c := range cases {
		res := r.Call(context.Background(), "greet", json.RawMessage(c.args))
		if !res.IsError {
			t.Errorf("%s: not an error: %+v", c.args, res)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(res.Text, w) {
				t.Errorf("%s: %q lacks %q", c.args, res.Text, w)
			}
		}
		// The brief schema comes along so the model can retry without looking anything up.
		if !strings.Contains(res.Text, "- name (string, required): Who to greet") ||
			!strings.Contains(res.Text, `- tone (string, one of ["warm","formal"], default "warm")`) {
			t.Errorf("%s: summary missing in %q", c.args, res.Text)
		}
	}
}

func TestValidationMessagesNested(t *testing.T) {
	t.Parallel()
	type edit struct {
		Line int    `json:"line"`
		Text string `json:"text"`
	}
	type patchIn struct {
		Path  string `json:"path"`
		Edits []edit `json:"edits"`
		Opts  struct {
			Mode string `json:"mode" jsonschema:"enum=strict,enum=loose"`
		} `json:"opts"`
	}
	r := NewRegistry()
	must(t, r.Register(New("patch", "d", func(context.Context, patchIn) (string, error) { return "ok", nil })))
	cases := map[string]string{
		`{"path":"a","edits":[{"line":"one","text":"x"}],"opts":{"mode":"strict"}}`: `field "edits[].line": expected integer, got string "one"`,
		`{"path":"a","edits":[{"line":1}],"opts":{"mode":"strict"}}`:                `missing required field "text" in "edits[]"`,
		`{"path":"a","edits":[],"opts":{"mode":"lax"}}`:                             `field "opts.mode": value "lax" is not allowed; expected one of ["strict","loose"]`,
		`{"path":"a","edits":[],"opts":{"mode":"strict","x":1}}`:                    `field "opts": unknown field "x"; allowed fields are "mode"`,
	}
	for args, want := range cases {
		res := r.Call(context.Background(), "patch", json.RawMessage(args))
		if !res.IsError || !strings.Contains(res.Text, want) {
			t.Errorf("%s:\n got %q\nwant %q", args, res.Text, want)
		}
	}
}

// rawTool stands in for an MCP tool: a hand-written schema and no Go types.
type rawTool struct{ spec Spec }

func (t rawTool) Spec() Spec { return t.spec }
func (t rawTool) Call(_ context.Context, args json.RawMessage) Result {
	return Result{Text: string(args)}
}

func TestForeignSchemas(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	must(t, r.Register(rawTool{Spec{Name: "old", Parameters: json.RawMessage(
		`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}}))
	must(t, r.Register(rawTool{Spec{Name: "bare"}})) // no schema at all: any object goes
	if res := r.Call(context.Background(), "old", json.RawMessage(`{"q":"x"}`)); res.IsError || res.Text != `{"q":"x"}` {
		t.Errorf("draft-04: %+v", res)
	}
	if res := r.Call(context.Background(), "old", json.RawMessage(`{"q":1}`)); !res.IsError || !strings.Contains(res.Text, `field "q": expected string`) {
		t.Errorf("draft-04 invalid: %+v", res)
	}
	if res := r.Call(context.Background(), "bare", json.RawMessage(`{"anything":[1]}`)); res.IsError {
		t.Errorf("bare: %+v", res)
	}
	if err := r.Register(rawTool{Spec{Name: "broken", Parameters: json.RawMessage(`{"type":`)}}); err == nil {
		t.Error("broken schema accepted")
	}
}

func TestUnknownToolListsAvailable(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	res := r.Call(context.Background(), "gret", nil)
	if !res.IsError || !strings.Contains(res.Text, `Unknown tool "gret"`) || !strings.Contains(res.Text, "greet") {
		t.Errorf("got %+v", res)
	}
}

func TestGoErrorBecomesResult(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	_ = r.Register(New("fail", "d", func(context.Context, struct{}) (string, error) {
		return "", errors.New("disk on fire")
	}))
	if res := r.Call(context.Background(), "fail", nil); !res.IsError || res.Text != "disk on fire" {
		t.Errorf("got %+v", res)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	r := NewRegistry(WithLogger(slog.New(slog.DiscardHandler)))
	// One tool honours its context, the other ignores it; both must come back at the deadline.
	_ = r.Register(New("polite", "d", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}, WithTimeout(30*time.Millisecond)))
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	_ = r.Register(New("stubborn", "d", func(context.Context, struct{}) (string, error) {
		<-block
		return "late", nil
	}, WithTimeout(30*time.Millisecond)))
	// "stubborn" never returns before Cleanup, so Call coming back at all shows it was abandoned; the message
	// shows which deadline fired (the default is 60 s).
	for _, name := range []string{"polite", "stubborn"} {
		res := r.Call(context.Background(), name, nil)
		if !res.IsError || !strings.Contains(res.Text, "timed out after 30ms") {
			t.Errorf("%s: %+v", name, res)
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	r := NewRegistry(WithLogger(slog.New(slog.DiscardHandler)))
	started := make(chan struct{})
	_ = r.Register(New("wait", "d", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}))
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() { <-started; cancel(errors.New("user pressed ctrl-c")) }()
	res := r.Call(ctx, "wait", nil)
	if !res.IsError || !strings.Contains(res.Text, "canceled") || !strings.Contains(res.Text, "ctrl-c") {
		t.Errorf("got %+v", res)
	}
	// An already-canceled context does not start the tool.
	if res := r.Call(ctx, "wait", nil); !res.IsError || !strings.Contains(res.Text, "not run") {
		t.Errorf("got %+v", res)
	}
}

func TestPanicRecovered(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	r := NewRegistry(WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	_ = r.Register(New("boom", "d", func(context.Context, struct{}) (string, error) {
		var m map[string]int
		//lint:ignore SA5000 the test needs a real runtime panic, not a panic call
		m["x"] = 1
		return "", nil
	}))
	res := r.Call(context.Background(), "boom", nil)
	if !res.IsError || !strings.Contains(res.Text, `Tool "boom" crashed`) || !strings.Contains(res.Text, "nil map") {
		t.Errorf("got %+v", res)
	}
	if !strings.Contains(logs.String(), "registry_test.go") {
		t.Errorf("stack not logged: %s", logs.String())
	}
}

func TestOutputTruncated(t *testing.T) {
	t.Parallel()
	r := NewRegistry(WithMaxOutput(10))
	_ = r.Register(New("long", "d", func(context.Context, struct{}) (string, error) {
		return "ééééééééééé", nil // 22 bytes; the cut must not split a rune
	}))
	res := r.Call(context.Background(), "long", nil)
	if !res.Truncated || res.Text != "ééééé\n[output truncated: 10 of 22 bytes shown]" {
		t.Errorf("got %+v", res)
	}
}

func TestResultPassesImagesThrough(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	_ = r.Register(New("pic", "d", func(context.Context, struct{}) (Result, error) {
		return Result{Text: "a pic", Images: []Image{{MIME: "image/png", Data: []byte{1}}}}, nil
	}, ReturnsImages()))
	res := r.Call(context.Background(), "pic", nil)
	if len(res.Images) != 1 || res.Images[0].MIME != "image/png" || !r.Specs()[0].ReturnsImages {
		t.Errorf("got %+v", res)
	}
}

func BenchmarkRegistryCall(b *testing.B) {
	r := NewRegistry()
	_ = r.Register(New("greet", "d", greet))
	args := json.RawMessage(`{"name":"Ada","tone":"formal"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := r.Call(ctx, "greet", args); res.IsError {
			b.Fatal(res.Text)
		}
	}
}

// BenchmarkValidate isolates the schema check from dispatch, to show where Call's time goes.
func BenchmarkValidate(b *testing.B) {
	v, err := newValidator("greet", New("greet", "d", greet).Spec().Parameters)
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"name":"Ada","tone":"formal"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, msg := v.check(args); msg != "" {
			b.Fatal(msg)
		}
	}
}

// TestConcurrentUse runs calls while tools are being registered; run with -race.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			_ = r.Register(New(fmt.Sprintf("t%02d", i), "d", greet))
			_ = r.Specs()
		}
	}()
	for range 50 {
		if res := r.Call(context.Background(), "greet", json.RawMessage(`{"name":"x"}`)); res.IsError {
			t.Fatal(res.Text)
		}
	}
	<-done
	if n := len(r.Specs()); n != 21 {
		t.Errorf("specs = %d, want 21", n)
	}
}
