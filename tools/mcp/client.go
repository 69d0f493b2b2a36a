package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/internal/redact"
	"github.com/visorhq/visor/tools"
)

// ServerConfig says how to reach one MCP server. Exactly one of Command, URL and Transport is set.
type ServerConfig struct {
	// Name identifies the server in tool names, logs and error messages (e.g. "fs"). Required.
	Name string

	// Command starts the server as a subprocess speaking MCP on its stdin and stdout.
	Command string
	Args    []string
	// Env holds KEY=value entries added to visor's own environment for the subprocess.
	Env []string
	// Dir is the subprocess's working directory; empty means visor's.
	Dir string

	// URL is a streamable HTTP endpoint (e.g. http://127.0.0.1:8080/mcp).
	URL string
	// Headers are sent with every HTTP request, e.g. Authorization.
	Headers map[string]string

	// Transport, when set, makes a fresh connection for each (re)connect: for in-process servers and tests.
	Transport func() sdk.Transport

	// Prefix is put before each of the server's tool names; empty means Name + "__" (fs__read_file).
	Prefix string
	// NoPrefix keeps the server's own tool names; only safe when no other tools could share them.
	NoPrefix bool
	// Tools, when set, keeps only these of the server's tools (its own names, before the prefix): every tool's
	// description goes into every prompt, and a server's whole list can outgrow a small model's context.
	Tools []string
	// Timeout bounds each call (tools.Spec.Timeout); zero leaves the Registry's default.
	Timeout time.Duration
	// InitTimeout bounds reaching the server: starting it, the initialize handshake and listing its tools, at
	// Connect and at each restart. Zero means DefaultInitTimeout.
	InitTimeout time.Duration
	// ReturnsImages marks the server's tools as ones that may return images (a browser or screenshot server),
	// so the engine planner keeps a vision encoder ready; MCP tool listings do not say so themselves.
	ReturnsImages bool
	// Logger receives restarts and the server's stderr at debug level; nil discards.
	Logger *slog.Logger
}

// DefaultInitTimeout bounds reaching a server (ServerConfig.InitTimeout): a server that never answers initialize
// must not hang visor.
const DefaultInitTimeout = 30 * time.Second

// reconnectTimeout bounds refreshing the tool list after a change notification.
const reconnectTimeout = 30 * time.Second

// errInitTimeout is the cause of a context that ran out during InitTimeout.
var errInitTimeout = errors.New("MCP server did not answer in time")

func (cfg ServerConfig) initTimeout() time.Duration {
	if cfg.InitTimeout > 0 {
		return cfg.InitTimeout
	}
	return DefaultInitTimeout
}

// what names how the server is reached, for messages.
func (cfg ServerConfig) what() string {
	switch {
	case cfg.Command != "":
		return strings.Join(append([]string{cfg.Command}, cfg.Args...), " ")
	case cfg.URL != "":
		return redact.URL(cfg.URL)
	}
	return "its transport"
}

// ErrClosed is returned by calls on a Client after Close.
var ErrClosed = errors.New("MCP client closed")

// Client is a connection to one MCP server and the tools it offered when it connected. It is safe for
// concurrent use: the Registry may run several of its tools at once.
type Client struct {
	cfg    ServerConfig
	logger *slog.Logger

	tmu   sync.Mutex // guards tools and regs; held while refreshing so refreshes apply in order
	tools []tools.Tool
	regs  []*tools.Registry

	mu     sync.Mutex
	cn     *conn // nil after Close
	closed bool
}

// conn is one live session; a restart replaces it whole.
type conn struct {
	sess   *sdk.ClientSession
	stderr *tail // nil unless the server is a subprocess
	done   chan struct{}
}

func (c *conn) dead() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Connect reaches the server, lists all its tools (following pagination) and wraps them. The subprocess, if
// any, lives until Close, not until ctx ends: ctx bounds only the connection and the listing, and so does
// InitTimeout.
func Connect(ctx context.Context, cfg ServerConfig) (*Client, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.initTimeout(), errInitTimeout)
	defer cancel()
	c := &Client{cfg: cfg, logger: cfg.Logger}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	cn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock() // a tools/list_changed refresh may already be looking
	c.cn = cn
	c.mu.Unlock()
	var remote []*sdk.Tool
	for t, err := range cn.sess.Tools(ctx, nil) {
		if err != nil {
			_ = c.Close()
			if errors.Is(context.Cause(ctx), errInitTimeout) {
				return nil, fmt.Errorf("MCP server %s (%s) answered initialize but did not list its tools within %s%s: "+
					"check the server, or raise its init timeout", cfg.Name, cfg.what(), cfg.initTimeout(), cn.stderr.note())
			}
			return nil, fmt.Errorf("MCP server %s: list tools: %w%s", cfg.Name, err, cn.stderr.note())
		}
		remote = append(remote, t)
	}
	remote, err = cfg.pick(remote, true)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	wrapped, err := c.wrap(remote)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.tmu.Lock()
	c.tools = wrapped
	c.tmu.Unlock()
	c.logger.Debug("MCP server connected", "server", cfg.Name, "tools", len(wrapped))
	return c, nil
}

func (cfg ServerConfig) check() error {
	if cfg.Name == "" {
		return errors.New("MCP server config has no Name: give each server a short name such as fs")
	}
	set := 0
	for _, ok := range []bool{cfg.Command != "", cfg.URL != "", cfg.Transport != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return fmt.Errorf("MCP server %s: set exactly one of Command (stdio), URL (streamable HTTP) or Transport", cfg.Name)
	}
	if cfg.URL != "" && !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return fmt.Errorf("MCP server %s: URL %q is not http(s): give the server's streamable HTTP endpoint", cfg.Name, redact.URL(cfg.URL))
	}
	return nil
}

// pick keeps the tools cfg.Tools names, in the server's order. With strict, a name the server does not list is
// an error that lists the ones it does.
func (cfg ServerConfig) pick(remote []*sdk.Tool, strict bool) ([]*sdk.Tool, error) {
	if len(cfg.Tools) == 0 {
		return remote, nil
	}
	want := map[string]bool{}
	for _, n := range cfg.Tools {
		want[n] = true
	}
	var kept []*sdk.Tool
	var names []string
	for _, t := range remote {
		names = append(names, t.Name)
		if want[t.Name] {
			kept = append(kept, t)
			delete(want, t.Name)
		}
	}
	if strict && len(want) > 0 {
		var missing []string
		for _, n := range cfg.Tools {
			if want[n] {
				missing = append(missing, n)
			}
		}
		return nil, fmt.Errorf("MCP server %s has no tool %s: it has %s; fix the server's tools list",
			cfg.Name, strings.Join(missing, ", "), strings.Join(names, ", "))
	}
	return kept, nil
}

// Name is the server's configured name.
func (c *Client) Name() string { return c.cfg.Name }

// Tools returns the server's tools wrapped for the Registry, in the order the server listed them.
func (c *Client) Tools() []tools.Tool {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	return append([]tools.Tool(nil), c.tools...)
}

// Register adds every tool of the server to reg, stopping at the first refusal (a duplicate name, or a schema
// the Registry cannot compile). reg then follows the server: when it announces a changed tool list, withdrawn
// tools are unregistered and new ones registered.
func (c *Client) Register(reg *tools.Registry) error {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	for _, t := range c.tools {
		if err := reg.Register(t); err != nil {
			return fmt.Errorf("MCP server %s: %w", c.cfg.Name, err)
		}
	}
	c.regs = append(c.regs, reg)
	return nil
}

// refresh re-lists the tools after the server announced a change, and brings Tools and the registries given
// to Register up to date. A tool whose spec changed is registered again under the same name.
func (c *Client) refresh(ctx context.Context) {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	cn, err := c.live(ctx)
	if err != nil {
		return
	}
	var remote []*sdk.Tool
	for t, err := range cn.sess.Tools(ctx, nil) {
		if err != nil {
			c.logger.Warn("MCP server changed its tools but listing them failed; keeping the old list",
				"server", c.cfg.Name, "err", err)
			return
		}
		remote = append(remote, t)
	}
	// A server may withdraw a picked tool later; that is the server's change to make, not an error.
	remote, _ = c.cfg.pick(remote, false)
	fresh, err := c.wrap(remote)
	if err != nil {
		c.logger.Warn("MCP server changed its tools to an unusable list; keeping the old one", "server", c.cfg.Name, "err", err)
		return
	}
	old := map[string]tools.Spec{}
	for _, t := range c.tools {
		old[t.Spec().Name] = t.Spec()
	}
	now := map[string]bool{}
	var added, removed []string
	for _, t := range fresh {
		sp := t.Spec()
		now[sp.Name] = true
		if prev, ok := old[sp.Name]; ok && sameSpec(prev, sp) {
			continue
		}
		for _, reg := range c.regs {
			reg.Unregister(sp.Name)
			if err := reg.Register(t); err != nil {
				c.logger.Warn("MCP tool not registered", "server", c.cfg.Name, "tool", sp.Name, "err", err)
			}
		}
		added = append(added, sp.Name)
	}
	for name := range old {
		if !now[name] {
			for _, reg := range c.regs {
				reg.Unregister(name)
			}
			removed = append(removed, name)
		}
	}
	c.tools = fresh
	c.logger.Info("MCP server changed its tools", "server", c.cfg.Name, "added_or_changed", added, "removed", removed)
}

func sameSpec(a, b tools.Spec) bool {
	return a.Description == b.Description && string(a.Parameters) == string(b.Parameters) && a.Parallel == b.Parallel
}

// Close ends the session; a subprocess gets its stdin closed, then SIGTERM, then SIGKILL, and is waited for,
// so none is left behind. Calls after Close return error Results.
func (c *Client) Close() error {
	c.mu.Lock()
	cn := c.cn
	c.cn, c.closed = nil, true
	c.mu.Unlock()
	if cn == nil {
		return nil
	}
	return c.end(cn)
}

// end closes one session. A server that exits non-zero when its stdin closes has still exited: that is not
// the caller's problem, so only failures to stop it are returned.
func (c *Client) end(cn *conn) error {
	err := cn.sess.Close()
	var exit *exec.ExitError
	if errors.As(err, &exit) || errors.Is(err, sdk.ErrConnectionClosed) {
		c.logger.Debug("MCP server exited", "server", c.cfg.Name, "status", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("MCP server %s: close: %w", c.cfg.Name, err)
	}
	return nil
}

// dial opens a new session.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	cn := &conn{done: make(chan struct{})}
	var t sdk.Transport
	switch {
	case c.cfg.Transport != nil:
		t = c.cfg.Transport()
	case c.cfg.Command != "":
		cmd := exec.Command(c.cfg.Command, c.cfg.Args...)
		cmd.Env = append(os.Environ(), c.cfg.Env...)
		cmd.Dir = c.cfg.Dir
		cn.stderr = &tail{max: 4 << 10, server: c.cfg.Name, logger: c.logger}
		cmd.Stderr = cn.stderr
		// A grandchild holding stderr open must not stall Close for ever.
		cmd.WaitDelay = 2 * time.Second
		setProcAttr(cmd)
		t = &commandTransport{cmd: cmd, terminate: 2 * time.Second}
	default:
		hc := &http.Client{Transport: headerTransport{headers: c.cfg.Headers, base: http.DefaultTransport}}
		t = &sdk.StreamableClientTransport{Endpoint: c.cfg.URL, HTTPClient: hc}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "visor", Version: "dev"}, &sdk.ClientOptions{
		Logger: c.logger, Capabilities: &sdk.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			// Not inline: listing from inside the notification handler would wait on the connection that is
			// delivering the notification.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), reconnectTimeout)
				defer cancel()
				c.refresh(ctx)
			}()
		},
	})
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		if errors.Is(context.Cause(ctx), errInitTimeout) {
			how := "the command is an MCP server on stdio (run by hand, it waits for JSON-RPC on stdin and answers)"
			if c.cfg.URL != "" {
				how = "the URL is the server's streamable HTTP endpoint (often ending in /mcp)"
			}
			return nil, fmt.Errorf("MCP server %s (%s) did not answer initialize within %s%s: check that %s",
				c.cfg.Name, c.cfg.what(), c.cfg.initTimeout(), cn.stderr.note(), how)
		}
		return nil, fmt.Errorf("MCP server %s: connect to %s: %w%s (check the command or URL)", c.cfg.Name, c.cfg.what(), redact.Error(err),
			cn.stderr.note())
	}
	cn.sess = sess
	go func() {
		_ = sess.Wait()
		close(cn.done)
	}()
	return cn, nil
}

// live returns the current session, restarting it first when the server has died since the last call: that
// restart is safe because no call was in flight.
func (c *Client) live(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.cn == nil {
		return nil, errors.New("not connected yet")
	}
	if !c.cn.dead() {
		return c.cn, nil
	}
	c.logger.Warn("MCP server died; restarting it", "server", c.cfg.Name, "stderr", c.cn.stderr.String())
	return c.replace(ctx, c.cn)
}

// restart replaces cn unless another call already did. Called with mu unlocked.
func (c *Client) restart(ctx context.Context, cn *conn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.cn != cn {
		return nil
	}
	_, err := c.replace(ctx, cn)
	return err
}

// replace swaps in a new session for old. Called with mu held; the old session is closed so its process is
// reaped even if it had only stopped answering.
func (c *Client) replace(ctx context.Context, old *conn) (*conn, error) {
	_ = c.end(old)
	// A server that accepts the connection but never answers must not hold every later call behind mu.
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.initTimeout(), errInitTimeout)
	defer cancel()
	cn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.cn = cn
	return cn, nil
}

// headerTransport adds fixed headers to every request of the streamable HTTP client.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// tail keeps the end of a subprocess's stderr, so a server that fails to start can say why in the error, and
// logs each write at debug level.
type tail struct {
	max    int
	server string
	logger *slog.Logger

	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.logger.Debug("MCP server stderr", "server", t.server, "text", strings.TrimSpace(string(p)))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// note formats the stderr tail for an error message, or nothing.
func (t *tail) note() string {
	if s := t.String(); s != "" {
		return "; its stderr said: " + s
	}
	return ""
}
