package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Image is a picture returned by a tool, kept as raw bytes; encoding for the wire is the caller's concern.
type Image struct {
	MIME string `json:"mime"`
	Data []byte `json:"data"`
}

// Result is what the model sees after a tool call. Errors meant for the model are Results with IsError set,
// never Go errors: the model can read them and try again, the agent loop cannot.
type Result struct {
	Text      string  `json:"text"`
	Images    []Image `json:"images,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
	Truncated bool    `json:"truncated,omitempty"`
}

// Errorf builds an error Result for the model.
func Errorf(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// Spec describes a tool to the model and to the agent loop.
type Spec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// ReturnsImages tells the engine planner that a call may produce pixels, so a vision encoder is needed next.
	ReturnsImages bool
	// Parallel marks tools that are safe to run alongside other calls of the same turn.
	Parallel bool
	// Timeout bounds one call; zero means the Registry's default.
	Timeout time.Duration
}

// Tool is anything the Registry can call: typed Go functions built with New, and later MCP tools.
// Call receives arguments already normalised to a JSON object and validated against Spec().Parameters by the
// Registry; it reports every failure as a Result.
type Tool interface {
	Spec() Spec
	Call(ctx context.Context, args json.RawMessage) Result
}

// Option adjusts the Spec of a tool built with New.
type Option func(*Spec)

// WithTimeout bounds each call of the tool.
func WithTimeout(d time.Duration) Option { return func(s *Spec) { s.Timeout = d } }

// Parallel marks the tool as safe to run concurrently with other calls.
func Parallel() Option { return func(s *Spec) { s.Parallel = true } }

// ReturnsImages marks the tool as one that may return images.
func ReturnsImages() Option { return func(s *Spec) { s.ReturnsImages = true } }

// New builds a Tool from a typed function. The parameter schema is generated from In's struct tags
// (json names, `jsonschema:"enum=a,enum=b,default=x,minimum=1"`, `jsonschema_description:"..."`); fields
// without omitempty are required. Out may be a string, a Result, or any JSON-encodable value.
// A schema that cannot be generated is a programming error and is reported by Registry.Register.
func New[In, Out any](name, description string, fn func(context.Context, In) (Out, error), opts ...Option) Tool {
	spec := Spec{Name: name, Description: description}
	params, err := schemaFor[In]()
	spec.Parameters = params
	for _, o := range opts {
		o(&spec)
	}
	return &typedTool[In, Out]{spec: spec, fn: fn, schemaErr: err}
}

type typedTool[In, Out any] struct {
	spec      Spec
	fn        func(context.Context, In) (Out, error)
	schemaErr error
}

func (t *typedTool[In, Out]) Spec() Spec { return t.spec }

// schemaError lets Register refuse a tool whose input type could not be reflected.
func (t *typedTool[In, Out]) schemaError() error { return t.schemaErr }

func (t *typedTool[In, Out]) Call(ctx context.Context, args json.RawMessage) Result {
	if t.schemaErr != nil {
		return Errorf("tool %s is misconfigured: %v", t.spec.Name, t.schemaErr)
	}
	var in In
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			// Only reachable when called without the Registry's validation in front.
			return Errorf("invalid arguments for %s: %v", t.spec.Name, err)
		}
	}
	out, err := t.fn(ctx, in)
	if err != nil {
		return Result{Text: err.Error(), IsError: true}
	}
	return toResult(out)
}

func toResult(out any) Result {
	switch v := out.(type) {
	case Result:
		return v
	case *Result:
		if v == nil {
			return Result{}
		}
		return *v
	case string:
		return Result{Text: v}
	case []byte:
		return Result{Text: string(v)}
	case nil:
		return Result{}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return Errorf("tool output could not be encoded as JSON: %v", err)
	}
	return Result{Text: string(b)}
}
