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
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/memory"
	"github.com/visorhq/visor/tools"
)

// Runner runs one user turn; *agent.Agent implements it.
type Runner = agent.Runner

// Store is what sessions need from memory; *memory.Store implements it.
type Store interface {
	agent.TurnStore
	CreateSession(ctx context.Context, sess memory.Session) (memory.Session, error)
	ResolveSessionID(ctx context.Context, prefix string) (string, error)
	Messages(ctx context.Context, sessionID string) ([]memory.Message, error)
}

// Config sets up a Server. Runner is required; the rest have defaults.
type Config struct {
	Runner Runner
	// Store, when set, keeps each call as a session that a later call may continue with "session".
	Store Store
	// ToolName is the one tool's name; default "ask".
	ToolName string
	// Description tells the calling model what the agent can do; the default is generic.
	Description string
	// Name and Version identify the server to clients; defaults "visor" and "dev".
	Name, Version string
	// Agent and Model label stored sessions (memory.Session.Agent, .Model); Agent defaults to "mcp".
	Agent, Model string
	// NoVision says the model cannot see images, so calls with images are refused with a message saying so
	// instead of failing inside the engine.
	NoVision bool
	// MaxImageBytes bounds each decoded image; default images.DefaultMaxBytes (20 MiB).
	MaxImageBytes int
	Logger        *slog.Logger
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every HTTP request and lets
	// ListenAndServe use a non-loopback address; KeyHint says how the user sets it, for the error without one.
	APIKey, KeyHint string
	// AllowedHosts and AllowedOrigins extend HTTP's loopback-only Host and same-origin checks (see httpguard).
	AllowedHosts, AllowedOrigins []string
}

// AskInput is the tool's input; its tags give the schema clients see.
type AskInput struct {
	Prompt  string  `json:"prompt" jsonschema:"the task or question for the agent"`
	Images  []Image `json:"images,omitempty" jsonschema:"images for the agent to look at"`
	Session string  `json:"session,omitempty" jsonschema:"id of an earlier session to continue (returned by an earlier call)"`
}

// Image is one attached picture.
type Image struct {
	Data string `json:"data" jsonschema:"the image file's bytes, standard base64"`
	MIME string `json:"mime,omitempty" jsonschema:"MIME type such as image/png; detected from the bytes when empty"`
}

// AskOutput is the tool's structured result; the answer is also the first text content.
type AskOutput struct {
	Answer    string `json:"answer"`
	Session   string `json:"session,omitempty"`
	Steps     int    `json:"steps"`
	ToolCalls int    `json:"tool_calls"`
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Server is the MCP server. One Server may serve many clients and calls at once; calls on the same session
// run one after another.
type Server struct {
	cfg    Config
	logger *slog.Logger
	srv    *sdk.Server
	guard  *httpguard.Guard

	mu       sync.Mutex
	sessions map[string]*sessionLock
}

type sessionLock struct {
	mu    sync.Mutex
	users int
}

// New builds the server and registers its tool.
func New(cfg Config) (*Server, error) {
	if cfg.Runner == nil {
		return nil, errors.New("mcpserver: Config.Runner is nil: pass the agent that answers prompts")
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
		if cfg.Store != nil {
			cfg.Description += " Pass the returned session id as \"session\" to continue the same conversation."
		}
	}
	if cfg.Name == "" {
		cfg.Name = "visor"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Agent == "" {
		cfg.Agent = "mcp"
	}
	if cfg.MaxImageBytes <= 0 {
		cfg.MaxImageBytes = images.DefaultMaxBytes
	}
	guard, err := httpguard.New(httpguard.Config{Name: "MCP server", APIKey: cfg.APIKey, KeyHint: cfg.KeyHint,
		AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins, MaxBodyBytes: MaxFrameBytes})
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, guard: guard, sessions: map[string]*sessionLock{}}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	schema, err := askSchema()
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: cfg.Name, Version: cfg.Version}, &sdk.ServerOptions{Logger: s.logger})
	sdk.AddTool(s.srv, &sdk.Tool{Name: cfg.ToolName, Description: cfg.Description, InputSchema: schema}, s.ask)
	return s, nil
}

// askSchema is AskInput's inferred schema with "images" as a plain array. Inference makes an omitempty slice
// {"type": ["null", "array"]}, which clients that pick a value's type from the schema (the MCP Inspector CLI
// among them) cannot handle, so they send the images as a string. Leaving "images" out already means none.
func askSchema() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[AskInput](nil)
	if err != nil {
		return nil, fmt.Errorf("ask input schema: %w", err)
	}
	im := s.Properties["images"]
	if im == nil {
		return nil, errors.New(`ask input schema has no "images"`)
	}
	im.Type, im.Types = "array", nil
	return s, nil
}

// MCP returns the underlying SDK server, for transports this package does not wrap.
func (s *Server) MCP() *sdk.Server { return s.srv }

// ask handles one call. Bad input and failed runs return Go errors, which the SDK turns into tool results with
// isError set: the calling model reads the message and can fix its call.
func (s *Server) ask(ctx context.Context, req *sdk.CallToolRequest, in AskInput) (*sdk.CallToolResult, AskOutput, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, AskOutput{}, errors.New(`"prompt" is empty: put the task or question for the agent in "prompt"`)
	}
	user := agent.Message{Role: "user", Content: in.Prompt}
	if len(in.Images) > 0 && s.cfg.NoVision {
		return nil, AskOutput{}, errors.New(`this agent's model cannot see images: leave "images" out and describe ` +
			`the picture in "prompt"`)
	}
	for i, im := range in.Images {
		img, err := s.decodeImage(i, im)
		if err != nil {
			return nil, AskOutput{}, err
		}
		user.Images = append(user.Images, img)
	}
	if in.Session != "" && s.cfg.Store == nil {
		return nil, AskOutput{}, fmt.Errorf(`"session" %q given, but this server keeps no sessions (started without a `+
			`database): leave "session" out`, in.Session)
	}

	var history []agent.Message
	var sessionID string
	var store agent.TurnStore
	if s.cfg.Store != nil {
		store = s.cfg.Store
		var err error
		if sessionID, history, err = s.openSession(ctx, in.Session, in.Prompt); err != nil {
			return nil, AskOutput{}, err
		}
		unlock := s.lock(sessionID)
		defer unlock()
		if in.Session != "" {
			// Read again under the lock: a call on the same session may have just finished.
			if _, history, err = s.openSession(ctx, sessionID, ""); err != nil {
				return nil, AskOutput{}, err
			}
		}
	}

	progress := newProgress(ctx, req)
	calls := 0
	// RunStored writes steps and closes the turn on contexts that outlive a client's cancel, so a stopped run
	// keeps what it did and is marked, not left open.
	f, _, storeErr := agent.RunStored(ctx, s.cfg.Runner, store, sessionID, history, user, func(ev agent.Event) {
		if _, ok := ev.(agent.ToolCallStarted); ok {
			calls++
		}
		progress.event(ev)
	})
	if storeErr != nil {
		s.logger.Error("storing the MCP session failed", "session", sessionID, "err", storeErr)
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

func (s *Server) decodeImage(i int, im Image) (tools.Image, error) {
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(im.Data))
	if err != nil {
		return tools.Image{}, fmt.Errorf("images[%d].data is not valid base64 (%v): send the image file's bytes in "+
			"standard base64, without a data: URL prefix", i, err)
	}
	if len(data) == 0 {
		return tools.Image{}, fmt.Errorf("images[%d].data is empty: send the image file's bytes in base64", i)
	}
	if len(data) > s.cfg.MaxImageBytes {
		return tools.Image{}, fmt.Errorf("images[%d] is %d bytes, more than the %d this server accepts: send a smaller image",
			i, len(data), s.cfg.MaxImageBytes)
	}
	detected := http.DetectContentType(data)
	if !strings.HasPrefix(detected, "image/") {
		return tools.Image{}, fmt.Errorf("images[%d] is not an image (the bytes look like %s): send a PNG, JPEG, GIF or WebP file",
			i, detected)
	}
	// The caller's type wins for formats the sniffer does not know (it is only a guess), but not when it
	// claims something other than an image.
	mime := im.MIME
	if !strings.HasPrefix(mime, "image/") {
		mime = detected
	}
	return tools.Image{MIME: mime, Data: data}, nil
}

// openSession continues a stored session (id may be a unique prefix) or creates one titled after the prompt.
func (s *Server) openSession(ctx context.Context, id, prompt string) (string, []agent.Message, error) {
	st := s.cfg.Store
	if id == "" {
		sess, err := st.CreateSession(ctx, memory.Session{Title: title(prompt), Agent: s.cfg.Agent, Model: s.cfg.Model})
		if err != nil {
			return "", nil, fmt.Errorf("create session: %w", err)
		}
		return sess.ID, nil, nil
	}
	full, err := st.ResolveSessionID(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf(`"session" %q: %w; leave "session" out to start a new one`, id, err)
	}
	msgs, err := st.Messages(ctx, full)
	if err != nil {
		return "", nil, fmt.Errorf("session %s: %w", full, err)
	}
	return full, agent.Resumable(msgs), nil
}

// lock serialises calls on one session: two runs appending to the same history would interleave their steps.
func (s *Server) lock(id string) (unlock func()) {
	s.mu.Lock()
	l := s.sessions[id]
	if l == nil {
		l = &sessionLock{}
		s.sessions[id] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.sessions, id)
		}
		s.mu.Unlock()
	}
}

func title(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if len(t) <= 60 {
		return t
	}
	cut := 60
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut] + "…"
}
