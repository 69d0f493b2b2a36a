// Package httpguard provides the checks that every visor HTTP front end (the web chat, MCP over streamable HTTP,
// the OpenAI-compatible gateway) puts in front of its handler, because the agent behind them runs tools on this
// machine and a web page the user happens to visit must not be able to drive it:
//
//   - Host allowlist: without an API key, a request must be addressed to a loopback name (localhost, 127.0.0.1,
//     [::1], with or without a port) or to a host the caller allows. A foreign Host is what DNS rebinding looks
//     like: the attacker's name resolves to 127.0.0.1, but the browser still sends the attacker's name.
//   - Origin check: no Origin (curl, an SDK, an editor) is fine; a present Origin must be this server's own
//     (same scheme, host and port as the request) or one the caller allows. Browsers always send Origin on
//     cross-site POSTs, so this stops a page on another site.
//   - JSON-only bodies: a body must be application/json (or a type the caller lists). text/plain, form and
//     multipart bodies are the ones a cross-site page can send without a CORS preflight: the CSRF shape.
//   - Body size: at most MaxBodyBytes unless the caller sets another bound; a declared larger body is refused
//     before it is read, with the limit in the message.
//   - Page token (optional, for pages this server serves): every state-changing request carries the token the
//     served page received (IssueToken) in the X-Visor-Token header.
//   - API key: CheckAddr refuses a non-loopback listen address unless a key is set; with a key, every request
//     must carry "Authorization: Bearer KEY". A browser never adds that header by itself, so with a key the Host
//     check is not needed.
//
// It does not serve TLS, rate-limit, or know users: one shared key is the only credential.
package httpguard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/visorhq/visor/images"
)

// MaxBodyBytes bounds one HTTP request body and one MCP stdio frame: an image of the documented limit
// (images.DefaultMaxBytes, 20 MiB) is 4/3 as large in base64 (26.7 MiB), and the remaining 5.3 MiB leave room for
// the prompt and the JSON around it. Several images in one request share this bound.
const MaxBodyBytes = 32 << 20

// TokenHeader carries the page token on state-changing requests.
const TokenHeader = "X-Visor-Token"

// ErrNoKey is wrapped by CheckAddr's error for a non-loopback address without an API key.
var ErrNoKey = errors.New("non-loopback address without an API key")

// Config sets up a Guard. The zero value guards a loopback-only JSON API.
type Config struct {
	// Name names the server in messages ("web chat", "MCP server").
	Name string
	// APIKey, when set, is required on every request as "Authorization: Bearer KEY".
	APIKey string
	// KeyHint tells the user how to set APIKey, for CheckAddr's error (e.g. "export VISOR_SERVE_KEY=…").
	KeyHint string
	// AllowedHosts are Host values accepted besides loopback names: "name" allows any port, "name:port" one.
	AllowedHosts []string
	// AllowedOrigins are origins ("https://app.example:8443") accepted besides the server's own.
	AllowedOrigins []string
	// BodyTypes are media types accepted for request bodies besides application/json (e.g. "image/png").
	BodyTypes []string
	// MaxBodyBytes bounds a request body; zero means MaxBodyBytes.
	MaxBodyBytes int64
	// PageToken requires a token from IssueToken on every request other than GET, HEAD and OPTIONS.
	PageToken bool
	// WriteError, when set, writes a refusal instead of Error, for an API whose clients expect their own error
	// shape (the gateway's OpenAI clients read {"error": {"message": …}}).
	WriteError func(w http.ResponseWriter, status int, msg string)
}

// Guard checks requests; it is safe for concurrent use.
type Guard struct {
	cfg     Config
	secret  []byte
	hosts   map[string]bool
	origins map[string]bool
	types   map[string]bool
}

// New returns a Guard for cfg.
func New(cfg Config) (*Guard, error) {
	if cfg.Name == "" {
		cfg.Name = "server"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = MaxBodyBytes
	}
	g := &Guard{cfg: cfg, secret: make([]byte, 32), hosts: map[string]bool{}, origins: map[string]bool{},
		types: map[string]bool{"application/json": true}}
	if _, err := rand.Read(g.secret); err != nil {
		return nil, fmt.Errorf("httpguard: page token secret: %w", err)
	}
	for _, h := range cfg.AllowedHosts {
		g.hosts[strings.ToLower(h)] = true
	}
	for _, o := range cfg.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("httpguard: allowed origin %q: want scheme://host[:port], such as https://app.example", o)
		}
		g.origins[origin(u.Scheme, u.Host)] = true
	}
	for _, t := range cfg.BodyTypes {
		g.types[strings.ToLower(t)] = true
	}
	return g, nil
}

// CheckAddr reports whether the server may listen on addr (host:port): see CheckListen.
func (g *Guard) CheckAddr(addr string) error {
	return CheckListen(g.cfg.Name, addr, g.cfg.APIKey, g.cfg.KeyHint)
}

// CheckListen reports whether the server called name may listen on addr (host:port): a loopback address
// always, any other only with an API key, since without one anybody who can reach the address could drive the
// agent. hint tells the user how to set the key ("export VISOR_SERVE_KEY=KEY"). Commands call it before they
// load a model, so a bad address fails at once.
func CheckListen(name, addr, apiKey, hint string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s address %q: %w (want HOST:PORT, such as 127.0.0.1:8765)", name, addr, err)
	}
	if IsLoopback(host) || apiKey != "" {
		return nil
	}
	if hint == "" {
		hint = "set an API key"
	}
	return fmt.Errorf("%s address %q: %w: anyone who can reach it could run the agent's tools on this machine; "+
		"%s (clients then send Authorization: Bearer KEY), or listen on 127.0.0.1:PORT", name, addr, ErrNoKey, hint)
}

// IsLoopback reports whether host (a name or IP literal, without port; brackets allowed) is loopback.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler returns next behind the checks. A refused request gets a JSON body {"error": "..."} that names what
// was wrong and what to do instead.
func (g *Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if status, msg := g.check(r); status != 0 {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="visor"`)
			}
			if g.cfg.WriteError != nil {
				g.cfg.WriteError(w, status, msg)
			} else {
				Error(w, status, "%s", msg)
			}
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// check returns the status and message refusing r, or 0.
func (g *Guard) check(r *http.Request) (int, string) {
	if g.cfg.APIKey != "" {
		// The scheme is case-insensitive (RFC 9110 §11.1); the key is not.
		auth := r.Header.Get("Authorization")
		ok := len(auth) > 7 && strings.EqualFold(auth[:7], "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(auth[7:])), []byte(g.cfg.APIKey)) != 1 {
			return http.StatusUnauthorized, fmt.Sprintf("the %s needs its API key: send the header "+
				"\"Authorization: Bearer KEY\" with the key it was started with", g.cfg.Name)
		}
	} else if !g.hostAllowed(r.Host) {
		return http.StatusForbidden, fmt.Sprintf("Host %q is not allowed: the %s answers only requests addressed "+
			"to localhost, 127.0.0.1 or [::1] (a foreign Host is how DNS rebinding reaches a local server); "+
			"open it as http://127.0.0.1:PORT", r.Host, g.cfg.Name)
	}
	if o := r.Header.Get("Origin"); o != "" && !g.originAllowed(r, o) {
		return http.StatusForbidden, fmt.Sprintf("Origin %q may not call the %s: only its own pages (and "+
			"origins it was told to allow) can, so a page on another site cannot drive the agent", o, g.cfg.Name)
	}
	if safeMethod(r.Method) {
		return 0, ""
	}
	if ct := r.Header.Get("Content-Type"); ct != "" || r.ContentLength != 0 {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !g.types[strings.ToLower(mt)] {
			return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q is not accepted: send the body as "+
				"%s (text/plain, form and multipart bodies are refused because any web page can send them)",
				ct, g.acceptedTypes())
		}
	}
	if r.ContentLength > g.cfg.MaxBodyBytes {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is %d bytes, more than the %d (%d MiB) "+
			"the %s accepts: send images of at most %d MiB, fewer per request", r.ContentLength, g.cfg.MaxBodyBytes,
			g.cfg.MaxBodyBytes>>20, g.cfg.Name, images.DefaultMaxBytes>>20)
	}
	if g.cfg.PageToken && !g.verify(r.Header.Get(TokenHeader)) {
		return http.StatusForbidden, fmt.Sprintf("missing or invalid page token: reload the page (its script "+
			"sends the token it was served with in the %s header)", TokenHeader)
	}
	return 0, ""
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func (g *Guard) acceptedTypes() string {
	if len(g.cfg.BodyTypes) == 0 {
		return "application/json"
	}
	return "application/json or " + strings.Join(g.cfg.BodyTypes, ", ")
}

func (g *Guard) hostAllowed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return IsLoopback(host) || g.hosts[host] || g.hosts[hostport]
}

func (g *Guard) originAllowed(r *http.Request, o string) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return false // "null" (sandboxed frames, file: pages) and garbage
	}
	got := origin(u.Scheme, u.Host)
	if g.origins[got] {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	// Same origin as the request itself, and that request passed the Host check (or carried the key).
	return got == origin(scheme, r.Host)
}

// origin normalises scheme://host[:port], dropping a default port.
func origin(scheme, host string) string {
	scheme, host = strings.ToLower(scheme), strings.ToLower(host)
	if h, p, err := net.SplitHostPort(host); err == nil && (scheme == "http" && p == "80" || scheme == "https" && p == "443") {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return scheme + "://" + host
}

// IssueToken returns a new page token to embed in a served page. Tokens need no server state: each is a random
// nonce and its MAC under this Guard's secret, so they stay valid for the Guard's life and no longer.
func (g *Guard) IssueToken() string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // crypto/rand.Read does not fail on supported platforms
	return base64.RawURLEncoding.EncodeToString(nonce) + "." + base64.RawURLEncoding.EncodeToString(g.mac(nonce))
}

// Token returns r's page token if it is valid, else "". Handlers use it to tie what a page created (a chat
// session) to that page.
func (g *Guard) Token(r *http.Request) string {
	if t := r.Header.Get(TokenHeader); g.verify(t) {
		return t
	}
	return ""
}

func (g *Guard) verify(tok string) bool {
	n, m, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	nonce, err1 := base64.RawURLEncoding.DecodeString(n)
	mac, err2 := base64.RawURLEncoding.DecodeString(m)
	return err1 == nil && err2 == nil && len(nonce) == 16 && hmac.Equal(mac, g.mac(nonce))
}

func (g *Guard) mac(nonce []byte) []byte {
	h := hmac.New(sha256.New, g.secret)
	h.Write(nonce)
	return h.Sum(nil)[:16]
}

// Error writes {"error": message} with status; handlers behind a Guard use it so every refusal reads alike.
func Error(w http.ResponseWriter, status int, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, a...)})
}

// ListenAndServe serves h on addr, once CheckAddr allows it, until ctx ends; ready, when set, gets the bound
// address before the first request. On ctx's end requests in flight get 5 s, then open streams (SSE) are cut.
// Every HTTP front end serves through it, so the address rule and the shutdown are one piece of code.
func (g *Guard) ListenAndServe(ctx context.Context, addr string, h http.Handler, ready func(net.Addr)) error {
	if err := g.CheckAddr(addr); err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		// Most often the same command still running in another terminal.
		return fmt.Errorf("%s address %s: in use (another visor, or another program, listens there): stop it, or "+
			"give another port (127.0.0.1:0 picks a free one): %w", g.cfg.Name, addr, err)
	}
	if err != nil {
		return fmt.Errorf("%s address %s: %w", g.cfg.Name, addr, err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("%s at %s: %w", g.cfg.Name, ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	return nil
}
