// Package mcpserver exposes a visor agent as a Model Context Protocol server with one tool (default "ask"):
// another agent or editor sends a prompt, optionally with images and a session to continue, and gets the
// agent's final answer; tool calls are reported as MCP progress notifications while the run goes on. It serves
// over stdio (a malformed frame is answered with a JSON-RPC error, not fatal) or streamable HTTP behind
// httpguard (loopback only unless an API key is set).
//
// It does not build the agent, start the engine or choose tools: the caller passes a Runner (an *agent.Agent).
// Calling other MCP servers' tools is tools/mcp's job.
package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/session"
	"github.com/visorhq/visor/tools"
)

// Config sets up a Server. Runner is required; the rest have defaults.
type Config struct {
	// Sessions runs the calls; a stored service lets a later call continue a session with "session".
	Sessions *session.Service
	// ToolName is the one tool's name; default "ask".
	ToolName string
	// Description tells the calling model what the agent can do; the default is generic.
	Description string
	// Name and Version identify the server to clients; defaults "visor" and "dev".
	Name, Version string
	Logger        *slog.Logger
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every HTTP request and lets
	// ListenAndServe use a non-loopback address; KeyHint says how the user sets it, for the error without one.
	APIKey, KeyHint string
	// AllowedHosts and AllowedOrigins extend HTTP's loopback-only Host and same-origin checks (see httpguard).
	AllowedHosts, AllowedOrigins []string
	// HTTPSessionIdle closes an HTTP client's MCP session after this long without a request; default
	// DefaultHTTPSessionIdle.
	HTTPSessionIdle time.Duration
}

// DefaultHTTPSessionIdle is Config.HTTPSessionIdle's default.
const DefaultHTTPSessionIdle = 30 * time.Minute

// AskInput is the tool's input; its tags give the schema clients see.
type AskInput struct {
	Prompt  string  `json:"prompt" jsonschema:"required" jsonschema_description:"the task or question for the agent"`
	Images  []Image `json:"images,omitempty" jsonschema_description:"images for the agent to look at"`
	Session string  `json:"session,omitempty" jsonschema_description:"id of an earlier session to continue (returned by an earlier call)"`
}

// Image is one attached picture.
type Image struct {
	Data string `json:"data" jsonschema:"required" jsonschema_description:"the image file's bytes, standard base64"`
	MIME string `json:"mime,omitempty" jsonschema_description:"MIME type such as image/png; detected from the bytes when empty"`
}

// AskOutput is the tool's structured result; the answer is also the first text content.
type AskOutput struct {
	Answer    string `json:"answer"`
	Session   string `json:"session,omitempty"`
	Steps     int    `json:"steps"`
	ToolCalls int    `json:"tool_calls"`
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// maxSessionID bounds "session": visor's ids are 16 hex digits (a prefix of one is taken too); anything much
// longer is no id, and echoing it back whole in every error would only repeat the client's garbage.
const maxSessionID = 128

// badSession says what is wrong with a "session" argument that cannot be any session's id, "" when it may be.
func badSession(id string) string {
	if len(id) > maxSessionID {
		return fmt.Sprintf(`"session" is %d bytes (%.24q…): a session id is the short hex string an earlier call returned; `+
			`leave "session" out to start a new one`, len(id), id)
	}
	if strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) >= 0 {
		return fmt.Sprintf(`"session" %q holds control characters: a session id is the short hex string an earlier `+
			`call returned; leave "session" out to start a new one`, id)
	}
	return ""
}

// Server is the MCP server. One Server may serve many clients and calls at once; calls on the same session
// run one after another.
type Server struct {
	cfg    Config
	logger *slog.Logger
	srv    *sdk.Server
	guard  *httpguard.Guard
}

// New builds the server and registers its tool.
func New(cfg Config) (*Server, error) {
	if cfg.Sessions == nil {
		return nil, errors.New("mcpserver: Config.Sessions is nil: pass the session service that answers prompts")
	}
	if cfg.ToolName == "" {
		cfg.ToolName = "ask"
	}
	// The SDK only logs a bad name; clients (visor's own registry among them) would then refuse the tool.
	if !validName.MatchString(cfg.ToolName) {
		return nil, fmt.Errorf("mcpserver: tool name %q: use 1-64 of a-z A-Z 0-9 _ -", cfg.ToolName)
	}
	if cfg.Description == "" {
		cfg.Description = "Ask a local visor agent to do a task or answer a question. It may use its own tools " +
			"before answering; the result is its final answer."
		if cfg.Sessions.Stored() {
			cfg.Description += " Pass the returned session id as \"session\" to continue the same conversation."
		}
	}
	if cfg.Name == "" {
		cfg.Name = "visor"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.HTTPSessionIdle <= 0 {
		cfg.HTTPSessionIdle = DefaultHTTPSessionIdle
	}
	guard, err := httpguard.New(httpguard.Config{Name: "MCP server", APIKey: cfg.APIKey, KeyHint: cfg.KeyHint,
		AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins, MaxBodyBytes: MaxFrameBytes})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, guard: guard}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	schema, err := askSchema()
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: cfg.Name, Version: cfg.Version},
		&sdk.ServerOptions{Logger: slog.New(quietStop{s.logger.Handler()})})
	sdk.AddTool(s.srv, &sdk.Tool{Name: cfg.ToolName, Description: cfg.Description, InputSchema: schema}, s.ask)
	return s, nil
}

// askSchema is AskInput's schema from visor's one schema generator (tools.SchemaFor), the dialect the built-in
// tools use. "images" is a plain array: leaving it out already means none, and clients that pick a value's type
// from the schema (the MCP Inspector CLI among them) cannot handle a ["null", "array"] type.
func askSchema() (*jsonschema.Schema, error) {
	raw, err := tools.SchemaFor[AskInput]()
	if err != nil {
		return nil, fmt.Errorf("ask input schema: %w", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("ask input schema: %w", err)
	}
	im := s.Properties["images"]
	if im == nil {
		return nil, errors.New(`ask input schema has no "images"`)
	}
	im.Type, im.Types = "array", nil
	return &s, nil
}

// MCP returns the underlying SDK server, for transports this package does not wrap.
func (s *Server) MCP() *sdk.Server { return s.srv }

// ask handles one call. Bad input and failed runs return Go errors, which the SDK turns into tool results with
// isError set: the calling model reads the message and can fix its call.
func (s *Server) ask(ctx context.Context, req *sdk.CallToolRequest, in AskInput) (*sdk.CallToolResult, AskOutput, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, AskOutput{}, errors.New(`"prompt" is empty: put the task or question for the agent in "prompt"`)
	}
	svc := s.cfg.Sessions
	if msg := badSession(in.Session); msg != "" {
		return nil, AskOutput{}, errors.New(msg)
	}
	if in.Session != "" && !svc.Stored() {
		return nil, AskOutput{}, fmt.Errorf(`"session" %q given, but this server keeps no sessions (started without a `+
			`database): leave "session" out`, in.Session)
	}
	var imgs []tools.Image
	for i, im := range in.Images {
		data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(im.Data))
		if err != nil {
			return nil, AskOutput{}, fmt.Errorf("images[%d].data is not valid base64 (%w): send the image file's bytes in "+
				"standard base64, without a data: URL prefix", i, err)
		}
		img, err := svc.CheckImage(data)
		if err != nil {
			return nil, AskOutput{}, fmt.Errorf("images[%d]: %w", i, err)
		}
		imgs = append(imgs, img)
	}
	conv, err := svc.Open(ctx, session.OpenOptions{Resume: in.Session, Title: in.Prompt})
	if err != nil {
		if in.Session != "" {
			return nil, AskOutput{}, fmt.Errorf(`"session" %q: %w; leave "session" out to start a new one`, in.Session, err)
		}
		return nil, AskOutput{}, err
	}
	defer conv.Close()
	progress := newProgress(ctx, req)
	calls := 0
	// The session writes steps and closes the turn on contexts that outlive a client's cancel, so a stopped run
	// keeps what it did and is marked, not left open.
	turn, runErr := conv.Turn(ctx, in.Prompt, imgs, func(ev agent.Event) {
		if _, ok := ev.(agent.ToolCallStarted); ok {
			calls++
		}
		progress.event(ev)
	})
	f, sessionID := turn.Finished, ""
	if turn.Stored {
		sessionID = turn.SessionID // a session the engine never answered in is not one to continue
	}
	if errors.Is(runErr, session.ErrNotStored) {
		// The answer stands; only keeping it failed.
		s.logger.Error("storing the MCP session failed", "session", sessionID, "err", runErr)
	} else if runErr != nil {
		f.Err = runErr
	}
	if f.Err != nil && f.Reason == "" && f.Steps == 0 {
		// Refused before the agent ran (an image over the per-message limit, a busy session): say that.
		return nil, AskOutput{}, fmt.Errorf("the call was refused before the agent ran: %w", f.Err)
	}
	if f.Err != nil {
		msg := fmt.Sprintf("the agent stopped (%s) after %d steps: %v", f.Reason, f.Steps, f.Err)
		if f.Final.Content != "" {
			msg += "\nPartial answer: " + f.Final.Content
		}
		if sessionID != "" {
			msg += "\nSession: " + sessionID
		}
		return nil, AskOutput{}, errors.New(msg)
	}
	out := AskOutput{Answer: f.Final.Content, Session: sessionID, Steps: f.Steps, ToolCalls: calls}
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: f.Final.Content}}}
	if sessionID != "" {
		// The calling model sees content, not always structured output: tell it how to continue.
		res.Content = append(res.Content, &sdk.TextContent{Text: fmt.Sprintf(`[session %s: pass "session": %q to continue]`,
			sessionID, sessionID)})
	}
	return res, out, nil
}

// quietStop drops the SDK's "server run cancelled", which it logs as an error when the server is stopped the
// normal way (Ctrl-C, or the client ending it with a signal): `visor mcp serve` printed level=ERROR on every quit.
type quietStop struct{ slog.Handler }

func (q quietStop) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "server run cancelled" {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietStop) WithAttrs(as []slog.Attr) slog.Handler { return quietStop{q.Handler.WithAttrs(as)} }
func (q quietStop) WithGroup(name string) slog.Handler    { return quietStop{q.Handler.WithGroup(name)} }
