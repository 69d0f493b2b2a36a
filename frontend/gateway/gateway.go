package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/httpguard"
	"github.com/visorhq/visor/session"
)

// Config sets up a Gateway. Models is required.
type Config struct {
	Models []Model
	// APIKey, when set, is required on every request; it must be set to listen off loopback (httpguard).
	APIKey  string
	KeyHint string
	// AllowedHosts and AllowedOrigins widen httpguard's loopback Host and same-origin rules; a browser page of
	// an allowed origin is also answered with CORS headers (its preflight included). None are allowed by default.
	AllowedHosts   []string
	AllowedOrigins []string
	// MaxQueue bounds the requests waiting for a slot or a swap (default 64): one more is refused with 429.
	MaxQueue int
	// QueueTimeout bounds one request's wait in that queue (default 2 minutes): then 503.
	QueueTimeout time.Duration
	// IdleUnload unloads a model nobody asked for this long; 0 keeps models loaded.
	IdleUnload time.Duration
	// Images bounds each data-URL image a request for a local model carries (visor's image intake): a bad one is
	// refused at once with the reason, before the request waits for the engine.
	Images images.Limits
	// StreamIdle bounds the silence of an engine's started event stream (VISOR_STREAM_IDLE): then the client's
	// stream ends with an error event. 0 is session.DefaultStreamIdle; below 0, no bound.
	StreamIdle time.Duration
	// Recorder, when set, is given every answered exchange (storage as sessions).
	Recorder Recorder
	VRAM     VRAM
	Logger   *slog.Logger
}

// Recorder stores gateway traffic; Record is called after each answered request, off the response's path.
// *session.ClientRecorder stores it as sessions.
type Recorder interface {
	Record(ctx context.Context, x Exchange)
}

// Exchange is one answered chat request; ToolCall is a call in its answer.
type (
	Exchange = session.ClientExchange
	ToolCall = session.ClientCall
)

// Gateway is the OpenAI-compatible HTTP front end. Its methods are safe for concurrent use.
type Gateway struct {
	cfg     Config
	guard   *httpguard.Guard
	engines *session.Engines
	byName  map[string]Model
	metrics *metrics
	hc      *http.Client
	mux     *http.ServeMux
	paths   *http.ServeMux // the routes by path alone, for notFound's 405
	routes  []route
	cors    map[string]bool // origins a browser may call from (lower case, no trailing slash)
	names   []string
	checked *checkedImages // digests of images that passed intake
	alias   map[string]string
	resps   *responseStore
	started time.Time
	ctxMu   sync.Mutex
	ctx     map[string]int64 // context lengths read from the servers
	urls    map[string]string
}

// New returns a Gateway for cfg. No model is loaded until a request asks for it.
func New(cfg Config) (*Gateway, error) {
	if len(cfg.Models) == 0 {
		return nil, errors.New("gateway: no models configured")
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	if cfg.QueueTimeout <= 0 {
		cfg.QueueTimeout = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StreamIdle == 0 {
		cfg.StreamIdle = session.DefaultStreamIdle
	}
	for _, m := range cfg.Models {
		if _, err := toolcall.ParseFormat(m.ToolFormat); err != nil {
			return nil, fmt.Errorf("gateway: model %q: %w", m.Name, err)
		}
	}
	guard, err := httpguard.New(httpguard.Config{Name: "gateway", APIKey: cfg.APIKey, KeyHint: cfg.KeyHint,
		AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins, WriteError: statusError})
	if err != nil {
		return nil, err
	}
	m := newMetrics()
	ems, byName, err := engineModels(cfg.Models)
	if err != nil {
		return nil, err
	}
	engines, err := session.NewEngines(session.EnginesConfig{Models: ems, MaxQueue: cfg.MaxQueue,
		QueueTimeout: cfg.QueueTimeout, IdleUnload: cfg.IdleUnload, OnIdleUnload: func(n int) {
			cfg.Logger.Info("gateway: unloaded idle models", "count", n)
		}})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ems))
	for i, em := range ems {
		names[i] = em.Name
	}
	g := &Gateway{cfg: cfg, guard: guard, engines: engines, byName: byName, metrics: m, names: names, checked: newCheckedImages(1024),
		// One transport for every engine, with enough idle connections that concurrent streams do not redial;
		// no compression, so bytes pass through as the server wrote them.
		hc: &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, DisableCompression: true}}}
	g.alias, g.ctx, g.started = map[string]string{}, map[string]int64{}, time.Now()
	g.resps, g.urls = newResponseStore(64<<20), map[string]string{}
	for _, m := range cfg.Models {
		for _, a := range m.Aliases {
			if _, dup := byName[a]; dup || g.alias[a] != "" {
				return nil, fmt.Errorf("gateway: alias %q of model %q is already a model's name or alias", a, m.Name)
			}
			g.alias[a] = m.Name
		}
	}
	g.cors = map[string]bool{}
	for _, o := range cfg.AllowedOrigins {
		g.cors[strings.ToLower(strings.TrimSuffix(o, "/"))] = true
	}
	g.mux, g.paths = http.NewServeMux(), http.NewServeMux()
	g.handle(chatPath, g.chat, http.MethodPost)
	g.handle("/v1/responses", g.responses, http.MethodPost)
	g.handle(completionsPath, g.completions, http.MethodPost)
	g.handle(embeddingsPath, g.embeddings, http.MethodPost)
	g.handle("/v1/models", g.models, http.MethodGet)
	g.handle("/v1/models/{id...}", g.model, http.MethodGet)
	g.handle("/v1/visor/running", g.running, http.MethodGet)
	g.handle("/v1/visor/models/{id}/load", g.load, http.MethodPost)
	g.handle("/v1/visor/models/{id}/unload", g.unload, http.MethodPost)
	g.handle("/health", g.health, http.MethodGet)
	g.handle("/metrics", g.metricsPage, http.MethodGet)
	g.mux.HandleFunc("/", g.notFound)
	return g, nil
}

// Preload loads a model now and waits until it answers, so that one that cannot load fails at start rather
// than at the first request. Models that cannot stay loaded together unload each other as requests would.
func (g *Gateway) Preload(ctx context.Context, name string) error {
	name, ok := g.resolve(name)
	if !ok {
		return fmt.Errorf("gateway: no model %q to preload: the names are %s", name, strings.Join(g.names, ", "))
	}
	lease, err := g.engines.Acquire(ctx, name, "", -1)
	if err != nil {
		return fmt.Errorf("gateway: preload %s: %w", name, err)
	}
	defer lease.Release()
	t0 := time.Now()
	url, err := lease.Ready(ctx)
	if err != nil {
		return fmt.Errorf("gateway: model %q: %w", name, err)
	}
	g.ready(g.byName[name], url)
	g.metrics.swapWait(name, 0, time.Since(t0))
	return nil
}

// Handler returns the gateway behind httpguard's checks.
func (g *Gateway) Handler() http.Handler { return g.edge(g.guard.Handler(g.mux)) }

// ListenAndServe serves on addr until ctx ends; ready is called with the bound address. A non-loopback addr
// needs the API key.
func (g *Gateway) ListenAndServe(ctx context.Context, addr string, ready func(net.Addr)) error {
	return g.guard.ListenAndServe(ctx, addr, g.Handler(), ready)
}

// Close unloads every model.
func (g *Gateway) Close(ctx context.Context) error {
	g.hc.CloseIdleConnections()
	return g.engines.Close(ctx)
}

// apiError writes an OpenAI-shaped error, which every OpenAI SDK turns into its own error type.
func apiError(w http.ResponseWriter, status int, typ, code, param, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	e := map[string]any{"message": fmt.Sprintf(format, a...), "type": typ, "code": nil, "param": nil}
	if code != "" {
		e["code"] = code
	}
	if param != "" {
		e["param"] = param
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (g *Gateway) health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
}

func (g *Gateway) metricsPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	st := g.engines.Stats()
	g.metrics.queueDepth.Store(int64(st.Waiting))
	g.metrics.swaps.Store(int64(st.Swaps))
	g.metrics.write(w, g.engines.Loaded(), g.cfg.VRAM)
	fmt.Fprintf(w, "# HELP visor_gateway_model_loading_seconds How long the model has been loading; 0 when it is not loading.\n# TYPE visor_gateway_model_loading_seconds gauge\n")
	for _, n := range g.names {
		v := 0.0
		if st := g.engines.State(n); st.State == "loading" {
			v = max(time.Since(st.Since).Seconds(), 1e-3)
		}
		fmt.Fprintf(w, "visor_gateway_model_loading_seconds{model=\"%s\"} %g\n", label(n), v)
	}
}

// request is what the gateway reads of a chat body; everything else passes through untouched.
type request struct {
	model    string
	stream   bool
	tools    bool // tools offered and tool_choice not "none": calls in text are repaired
	body     []byte
	upstream []byte
	path     string // the route, sent on to the same path of the engine
}

// The OpenAI routes passed to the engine: chat completions (with the gateway's checks and tool-call repair),
// text completions and embeddings.
const (
	chatPath        = "/v1/chat/completions"
	completionsPath = "/v1/completions"
	embeddingsPath  = "/v1/embeddings"
)

func (g *Gateway) chat(w http.ResponseWriter, r *http.Request)        { g.serve(w, r, chatPath) }
func (g *Gateway) completions(w http.ResponseWriter, r *http.Request) { g.serve(w, r, completionsPath) }
func (g *Gateway) embeddings(w http.ResponseWriter, r *http.Request)  { g.serve(w, r, embeddingsPath) }

// readObject reads a request body that must be a JSON object; where it is not (too large, unreadable, not an
// object) it answers the client, naming the shape to send, and returns false.
func readObject(w http.ResponseWriter, r *http.Request, shape string) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			statusError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d MiB: send fewer or smaller images", mbe.Limit>>20))
			return nil, false
		}
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "", "reading the request body: %v", err)
		return nil, false
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "", "the body is not a JSON object: send %s", shape)
		return nil, false
	}
	return body, true
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, path string) {
	body, ok := readObject(w, r, `{"model": NAME, "messages": [...]}`)
	if !ok {
		return
	}
	fields := gjson.GetManyBytes(body, "model", "stream", "tools", "tool_choice")
	req := request{model: fields[0].String(), stream: fields[1].Bool(), body: body, upstream: body, path: path}
	req.tools = path == chatPath && fields[2].IsArray() && len(fields[2].Array()) > 0 && fields[3].String() != "none"
	if req.model == "" && len(g.names) == 1 {
		req.model = g.names[0]
	}
	name, ok := g.resolve(req.model)
	if !ok {
		// A name nobody configured is counted under one label: a client sending many names must not grow
		// /metrics (and memory) without bound.
		g.unknownModel(w, req.model)
		return
	}
	md := g.byName[name]
	var err error
	if md.UpstreamModel != "" {
		if req.upstream, err = setField(req.upstream, "model", md.UpstreamModel); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", "", "%v", err)
			return
		}
	}
	switch path {
	case completionsPath:
		if p := gjson.GetBytes(body, "prompt"); !p.Exists() || !(p.Type == gjson.String || p.IsArray()) {
			g.metrics.request(md.Name, http.StatusBadRequest)
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", "prompt", `"prompt" must be text or a list of texts: send "prompt": "Once upon a time"`)
			return
		}
		status := g.serveChat(w, r, md, req)
		g.metrics.request(md.Name, status)
		return
	case embeddingsPath:
		if !md.Remote && !md.Embeddings {
			g.metrics.request(md.Name, http.StatusBadRequest)
			apiError(w, http.StatusBadRequest, "invalid_request_error", "model_not_embedding", "model",
				"the model %q does not serve embeddings: set embeddings: true for it in the gateway's config (its server then runs with --embeddings), or use one that does", req.model)
			return
		}
		if in := gjson.GetBytes(body, "input"); !in.Exists() || !(in.Type == gjson.String || in.IsArray()) {
			g.metrics.request(md.Name, http.StatusBadRequest)
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", "input", `"input" must be text or a list of texts: send "input": "some text"`)
			return
		}
		status := g.serveChat(w, r, md, req)
		g.metrics.request(md.Name, status)
		return
	}
	if msg, param := checkMessages(body); msg != "" {
		g.metrics.request(md.Name, http.StatusBadRequest)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", param, "%s", msg)
		return
	}
	if !md.Remote && !md.Vision && hasAnyImage(body) {
		g.metrics.request(md.Name, http.StatusBadRequest)
		apiError(w, http.StatusBadRequest, "invalid_request_error", "model_not_vision", "messages",
			"the model %q takes no images (it has no vision projector): send text only, or use a model with mmproj: in the gateway's config", req.model)
		return
	}
	if !md.Remote {
		if err := checkImages(body, g.cfg.Images, g.checked); err != nil {
			g.metrics.request(md.Name, http.StatusBadRequest)
			apiError(w, http.StatusBadRequest, "invalid_request_error", "invalid_image", "messages", "%v", err)
			return
		}
	}
	if md.ToolsAsText && req.tools {
		f, _ := toolcall.ParseFormat(md.ToolFormat)
		if req.upstream, err = session.ToolsAsText(req.upstream, f); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", "tools", "%v", err)
			return
		}
	}
	status := g.serveChat(w, r, md, req)
	g.metrics.request(md.Name, status)
}

// serveChat answers one admitted request and returns the status sent.
func (g *Gateway) serveChat(w http.ResponseWriter, r *http.Request, md Model, req request) int {
	ctx := r.Context()
	// A request that has to wait with images is lookahead: they are evaluated in a spare server slot meanwhile
	// (the client going away cancels it), and the request is then sent to that slot.
	var pre *session.Ahead
	reserved, key := -1, conversationKey(req.upstream)
	if hasImages(req.upstream) && g.engines.Waits(md.Name) {
		if pre = g.startAhead(ctx, md, req, key); pre != nil {
			reserved = pre.Slot
			defer func() { <-pre.Done }()
		}
	}
	lease, err := g.engines.Acquire(ctx, md.Name, key, reserved)
	switch {
	case errors.Is(err, session.ErrEnginesBusy):
		w.Header().Set("Retry-After", "1")
		apiError(w, http.StatusTooManyRequests, "rate_limit_error", "queue_full", "", "the gateway is busy: %d requests are already waiting; retry shortly", g.cfg.MaxQueue)
		return http.StatusTooManyRequests
	case errors.Is(err, session.ErrQueueTimeout):
		w.Header().Set("Retry-After", "5")
		apiError(w, http.StatusServiceUnavailable, "server_error", "queue_timeout", "", "waited %s for the model %q without getting a slot; retry later", g.cfg.QueueTimeout, md.Name)
		return http.StatusServiceUnavailable
	case err != nil:
		return 499 // the client went away while queued
	}
	defer lease.Release()
	if pre != nil {
		<-pre.Done // the request continues the sequence its prefill left
	}
	swapWait, slot := lease.SwapWait(), lease.Slot()
	if slot >= 0 {
		if req.upstream, err = setField(req.upstream, "id_slot", slot); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", "", "%v", err)
			return http.StatusBadRequest
		}
	}
	g.metrics.inflight.Add(1)
	defer g.metrics.inflight.Add(-1)
	t0 := time.Now()
	var url string
	if req.stream && !md.Remote && g.engines.State(md.Name).State != "loaded" {
		started, stop := showLoading(w, r, req.model)
		w = started
		url, err = lease.Ready(ctx)
		stop()
	} else {
		url, err = lease.Ready(ctx)
	}
	if err != nil {
		return g.engineError(w, md, err)
	}
	g.ready(md, url)
	if load := time.Since(t0); swapWait > 0 || load > 100*time.Millisecond {
		g.metrics.swapWait(md.Name, swapWait+load, load)
	}
	resp, err := g.send(ctx, url, md, req.path, req.upstream)
	if err != nil && ctx.Err() == nil {
		// The server may have died between requests: the conductor checks, restarts it if it must, and the
		// request (which it never answered) is sent once more.
		if url, err = lease.Recover(ctx); err == nil {
			resp, err = g.send(ctx, url, md, req.path, req.upstream)
		}
	}
	if err != nil {
		return g.engineError(w, md, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && req.tools {
		if b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20)); rerr == nil && parseFailure(b) {
			return g.retryUnparsed(w, r, md, req, url)
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(b))
		}
	}
	if resp.StatusCode != http.StatusOK {
		return upstreamError(w, resp)
	}
	f, _ := toolcall.ParseFormat(md.ToolFormat)
	rep := &repairer{g: g, model: md.Name, format: f, req: req, tools: md.ToolsAsText}
	rn := newRenamer(w, req.model)
	if req.stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		copyHeaders(w, resp)
		w.WriteHeader(http.StatusOK)
		body := newIdleBody(resp.Body, g.cfg.StreamIdle)
		if req.tools || g.cfg.Recorder != nil && req.path == chatPath {
			rep.stream(ctx, rn, body)
		} else {
			g.passStream(rn, md.Name, body)
		}
		if body.stop() {
			g.cfg.Logger.Warn("gateway: the engine stopped sending", "model", md.Name, "idle", g.cfg.StreamIdle)
			streamError(rn, "server_error", "engine_idle", fmt.Sprintf("the model %q stopped sending: nothing arrived for %s "+
				"(the engine hangs or the connection stalled; the bound is VISOR_STREAM_IDLE)", req.model, g.cfg.StreamIdle))
			return http.StatusGatewayTimeout
		}
		return http.StatusOK
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return g.engineError(w, md, err)
	}
	if t, ok := timingsOf(b); ok {
		g.metrics.timings(md.Name, t)
	}
	if req.tools {
		b = rep.whole(b, "content")
	}
	b = rn.whole(b)
	copyHeaders(w, resp)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	if g.cfg.Recorder != nil && req.path == chatPath {
		g.record(r.Context(), req, b)
	}
	return http.StatusOK
}

// retryUnparsed answers a request whose answer the server could not parse ("Failed to parse input at pos N"):
// it asks again with tool_choice "none", which renders the same prompt but leaves the text unparsed, and parses
// the calls with visor's parser.
func (g *Gateway) retryUnparsed(w http.ResponseWriter, r *http.Request, md Model, req request, url string) int {
	up, err := setField(req.upstream, "tool_choice", "none")
	if err == nil {
		up, err = setField(up, "stream", false)
	}
	if err != nil {
		apiError(w, http.StatusInternalServerError, "server_error", "", "", "%v", err)
		return http.StatusInternalServerError
	}
	resp, err := g.send(r.Context(), url, md, chatPath, up)
	if err != nil {
		return g.engineError(w, md, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		if err == nil {
			err = fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, b)
		}
		return g.engineError(w, md, fmt.Errorf("asking again after the server failed to parse its tool call: %w", err))
	}
	f, _ := toolcall.ParseFormat(md.ToolFormat)
	rep := &repairer{g: g, model: md.Name, format: f, req: req}
	b = newRenamer(w, req.model).whole(rep.whole(b, "parse_error"))
	if g.cfg.Recorder != nil {
		defer g.record(r.Context(), req, b)
	}
	if req.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rep.replayAsStream(w, b)
		return http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return http.StatusOK
}

// upstreamError passes the engine's refusal on with its status, in OpenAI's shape (llama-server's carries a
// numeric code, and a remote server's may be anything).
func upstreamError(w http.ResponseWriter, resp *http.Response) int {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	msg := gjson.GetBytes(b, "error.message").String()
	if msg == "" {
		msg = gjson.GetBytes(b, "error").String()
	}
	if msg == "" || !gjson.ValidBytes(b) {
		msg = strings.TrimSpace(string(b))
		if len(msg) > 500 {
			msg = msg[:500] + "…"
		}
	}
	if msg == "" {
		msg = "the engine answered " + resp.Status
	}
	if _, ok := w.(*sseStarted); ok {
		typ := "invalid_request_error"
		if resp.StatusCode >= 500 {
			typ = "server_error"
		}
		streamError(w, typ, "", msg)
		return resp.StatusCode
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		w.Header().Set("Retry-After", v)
	}
	statusError(w, resp.StatusCode, msg)
	return resp.StatusCode
}

func parseFailure(b []byte) bool { return bytes.Contains(b, []byte("Failed to parse input at pos")) }

func (g *Gateway) engineError(w http.ResponseWriter, md Model, err error) int {
	g.cfg.Logger.Warn("gateway: engine failed", "model", md.Name, "err", err)
	if _, ok := w.(*sseStarted); ok {
		streamError(w, "server_error", "engine_unavailable", fmt.Sprintf("the model %q is not available: %v", md.Name, err))
		return http.StatusServiceUnavailable
	}
	w.Header().Set("Retry-After", "5")
	apiError(w, http.StatusServiceUnavailable, "server_error", "engine_unavailable", "", "the model %q is not available: %v", md.Name, err)
	return http.StatusServiceUnavailable
}

func (g *Gateway) send(ctx context.Context, base string, md Model, path string, body []byte) (*http.Response, error) {
	root := strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, root+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if md.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+md.APIKey)
	}
	return g.hc.Do(hr)
}

func copyHeaders(w http.ResponseWriter, resp *http.Response) {
	for _, k := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
}

// passStream copies an event stream as it arrives, flushing whenever the server has nothing more buffered, so
// each chunk reaches the client as soon as it left the server. It reads the timings line on the way.
func (g *Gateway) passStream(w http.ResponseWriter, model string, body io.Reader) {
	fl, _ := w.(http.Flusher)
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return
			}
			if bytes.Contains(line, []byte(`"timings"`)) && bytes.HasPrefix(line, []byte("data: ")) {
				if t, ok := timingsOf(line[6:]); ok {
					g.metrics.timings(model, t)
				}
			}
		}
		if br.Buffered() == 0 && fl != nil {
			fl.Flush()
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// timings is llama-server's per-response timing block.
type timings struct {
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftN             int     `json:"draft_n"`
	DraftNAccepted     int     `json:"draft_n_accepted"`
}

func timingsOf(b []byte) (timings, bool) {
	r := gjson.GetBytes(b, "timings")
	if !r.IsObject() {
		return timings{}, false
	}
	var t timings
	return t, json.Unmarshal([]byte(r.Raw), &t) == nil
}

// setField sets one top-level field of a JSON object, keeping the others' bytes.
func setField(body []byte, key string, v any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[key] = b
	return json.Marshal(m)
}

// CloseIdleConnections closes the kept-alive connections to the engines (tests count file descriptors).
func (g *Gateway) CloseIdleConnections() { g.hc.CloseIdleConnections() }
