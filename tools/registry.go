package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Defaults for a Registry built without options.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxOutput = 64 << 10 // bytes of Result.Text; roughly 16k tokens, a large share of a local context
)

// Sentinel errors returned by Register.
var (
	ErrDuplicate   = errors.New("tool already registered")
	ErrInvalidName = errors.New("invalid tool name")
)

// Names follow the OpenAI function-name rule, which llama-server's chat templates also assume.
var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Registry holds the tools offered to the model and runs their calls with validation, a timeout, panic
// recovery and an output cap. It is safe for concurrent use; parallel tool calls may share it.
type Registry struct {
	logger    *slog.Logger
	timeout   time.Duration
	maxOutput int

	mu    sync.RWMutex
	tools map[string]*entry
	names []string // sorted, so Specs is stable across runs and the prompt prefix cache survives
}

type entry struct {
	tool  Tool
	spec  Spec
	check *validator
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// WithLogger sets where crashes and timeouts are logged; the default is slog.Default().
func WithLogger(l *slog.Logger) RegistryOption { return func(r *Registry) { r.logger = l } }

// WithDefaultTimeout bounds calls of tools whose Spec has no Timeout.
func WithDefaultTimeout(d time.Duration) RegistryOption { return func(r *Registry) { r.timeout = d } }

// WithMaxOutput caps Result.Text in bytes; longer output is cut and marked. Zero or less disables the cap.
func WithMaxOutput(n int) RegistryOption { return func(r *Registry) { r.maxOutput = n } }

// NewRegistry returns an empty Registry.
func NewRegistry(opts ...RegistryOption) *Registry {
	r := &Registry{timeout: DefaultTimeout, maxOutput: DefaultMaxOutput, tools: map[string]*entry{}}
	for _, o := range opts {
		o(r)
	}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	return r
}

// Register adds a tool. Its schema is compiled here so that a broken schema fails at startup, not mid-run.
func (r *Registry) Register(t Tool) error {
	spec := t.Spec()
	if !validName.MatchString(spec.Name) {
		return fmt.Errorf("%w: %q (want 1-64 of a-z A-Z 0-9 _ -)", ErrInvalidName, spec.Name)
	}
	if se, ok := t.(interface{ schemaError() error }); ok && se.schemaError() != nil {
		return fmt.Errorf("tool %s: %w", spec.Name, se.schemaError())
	}
	v, err := newValidator(spec.Name, spec.Parameters)
	if err != nil {
		return fmt.Errorf("tool %s: %w", spec.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[spec.Name]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicate, spec.Name)
	}
	r.tools[spec.Name] = &entry{tool: t, spec: spec, check: v}
	i, _ := slices.BinarySearch(r.names, spec.Name)
	r.names = slices.Insert(r.names, i, spec.Name)
	return nil
}

// Unregister removes the named tool and reports whether it was there; MCP servers withdraw tools at runtime.
func (r *Registry) Unregister(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.tools[name]; !ok {
		return false
	}
	delete(r.tools, name)
	if i, ok := slices.BinarySearch(r.names, name); ok {
		r.names = slices.Delete(r.names, i, i+1)
	}
	return true
}

// Get returns the named tool.
func (r *Registry) Get(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[name]
	if !ok {
		return nil, false
	}
	return e.tool, true
}

// Specs returns the specs of all tools, sorted by name.
func (r *Registry) Specs() []Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Spec, len(r.names))
	for i, n := range r.names {
		out[i] = r.tools[n].spec
	}
	return out
}

// Call runs the named tool. Every failure, from an unknown name to a panic, comes back as a Result with
// IsError set, worded for the model.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) Result {
	r.mu.RLock()
	e, ok := r.tools[name]
	r.mu.RUnlock()
	if !ok {
		return Errorf("Unknown tool %q. Available tools: %s.", name, strings.Join(r.available(), ", "))
	}
	clean, msg := e.check.check(args)
	if msg != "" {
		return Result{Text: msg, IsError: true}
	}
	start := time.Now()
	res := r.capOutput(r.run(ctx, e, clean))
	r.logger.Debug("Tool call", "tool", name, "duration", time.Since(start), "is_error", res.IsError,
		"bytes", len(res.Text), "images", len(res.Images), "truncated", res.Truncated)
	return res
}

func (r *Registry) available() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.names) == 0 {
		return []string{"none"}
	}
	return slices.Clone(r.names)
}

// run calls the tool in its own goroutine so that a tool which ignores its context still cannot hold the
// agent past the timeout; such a goroutine is abandoned and logged.
func (r *Registry) run(ctx context.Context, e *entry, args json.RawMessage) Result {
	if err := ctx.Err(); err != nil {
		return Errorf("Tool %q was not run: %v.", e.spec.Name, context.Cause(ctx))
	}
	timeout := e.spec.Timeout
	if timeout <= 0 {
		timeout = r.timeout
	}
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errTimeout)
	defer cancel()

	done := make(chan Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.logger.Error("Tool panicked", "tool", e.spec.Name, "panic", p, "stack", string(debug.Stack()))
				done <- Errorf("Tool %q crashed: %v. This is a bug in the tool, not in your arguments; try another approach.", e.spec.Name, p)
			}
		}()
		done <- e.tool.Call(cctx, args)
	}()

	select {
	case res := <-done:
		// A tool that noticed the deadline and returned its own error should still read as a timeout.
		if errors.Is(context.Cause(cctx), errTimeout) && ctx.Err() == nil && res.IsError {
			res.Text = fmt.Sprintf("Tool %q timed out after %s. %s", e.spec.Name, timeout, res.Text)
		}
		return res
	case <-cctx.Done():
		if ctx.Err() != nil {
			r.logger.Warn("Tool call canceled", "tool", e.spec.Name, "cause", context.Cause(ctx))
			return Errorf("Tool %q was canceled: %v.", e.spec.Name, context.Cause(ctx))
		}
		r.logger.Warn("Tool call timed out", "tool", e.spec.Name, "timeout", timeout)
		return Errorf("Tool %q timed out after %s and was abandoned.", e.spec.Name, timeout)
	}
}

var errTimeout = errors.New("tool timeout")

func (r *Registry) capOutput(res Result) Result {
	if r.maxOutput <= 0 || len(res.Text) <= r.maxOutput {
		return res
	}
	res.Text = Truncate(res.Text, r.maxOutput)
	res.Truncated = true
	return res
}

// Truncate cuts s to at most n bytes on a UTF-8 boundary and appends the marker the model is told to expect:
// "[output truncated: N of M bytes shown]".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s\n[output truncated: %d of %d bytes shown]", s[:cut], cut, len(s))
}
