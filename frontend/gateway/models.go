package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// modelInfo is one entry of /v1/models: OpenAI's fields, then what agents ask llama-swap and Ollama for.
type modelInfo struct {
	ID           string   `json:"id"`
	Object       string   `json:"object"`
	Created      int64    `json:"created"`
	OwnedBy      string   `json:"owned_by"`
	Aliases      []string `json:"aliases,omitempty"`
	ContextLen   *int     `json:"context_length"`
	Capabilities []string `json:"capabilities"`
	State        string   `json:"state"`
	Remote       bool     `json:"remote,omitempty"`
	// LoadingSeconds is how long the model has been loading, while it is.
	LoadingSeconds *float64 `json:"loading_seconds,omitempty"`
	Inflight       int      `json:"inflight"`
}

func (g *Gateway) info(ctx context.Context, name string) modelInfo {
	md := g.byName[name]
	caps := []string{"chat", "completion", "tools"}
	if md.Vision {
		caps = append(caps, "vision")
	}
	if md.Embeddings {
		caps = append(caps, "embeddings")
	}
	if md.MTP {
		caps = append(caps, "mtp")
	}
	st := g.engines.State(name)
	mi := modelInfo{ID: name, Object: "model", Created: g.started.Unix(), OwnedBy: "visor", Aliases: md.Aliases,
		Capabilities: caps, State: st.State, Remote: md.Remote, Inflight: st.Inflight}
	if md.Remote {
		mi.State = "remote"
	}
	if n := md.Ctx; n > 0 {
		mi.ContextLen = &n
	} else if st.State == "loaded" && !md.Remote {
		g.readCtx(ctx, name)
		if n := int(g.ctxSeen(name)); n > 0 {
			mi.ContextLen = &n
		}
	}
	if st.State == "loading" {
		s := time.Since(st.Since).Seconds()
		mi.LoadingSeconds = &s
	}
	return mi
}

func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Object string      `json:"object"`
		Data   []modelInfo `json:"data"`
	}{Object: "list", Data: []modelInfo{}}
	for _, n := range g.names {
		out.Data = append(out.Data, g.info(r.Context(), n))
	}
	writeJSON(w, http.StatusOK, out)
}

// model is /v1/models/{id}, by name or alias.
func (g *Gateway) model(w http.ResponseWriter, r *http.Request) {
	name, ok := g.resolve(r.PathValue("id"))
	if !ok {
		g.unknownModel(w, r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, g.info(r.Context(), name))
}

// resolve turns a requested name or alias into the configured name.
func (g *Gateway) resolve(req string) (string, bool) {
	if _, ok := g.byName[req]; ok {
		return req, true
	}
	n, ok := g.alias[req]
	return n, ok
}

func (g *Gateway) unknownModel(w http.ResponseWriter, name string) {
	g.metrics.request(unknownModel, http.StatusNotFound)
	if name == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "model_not_found", "model", "no model named: set \"model\" to one of %s", strings.Join(g.names, ", "))
		return
	}
	apiError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "model",
		"the model %q does not exist here: this gateway serves %s", name, strings.Join(g.names, ", "))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// running is GET /v1/visor/running: the models loaded or loading now.
func (g *Gateway) running(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Object string      `json:"object"`
		Data   []modelInfo `json:"data"`
	}{Object: "list", Data: []modelInfo{}}
	for _, n := range g.names {
		if mi := g.info(r.Context(), n); mi.State == "loaded" || mi.State == "loading" {
			out.Data = append(out.Data, mi)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// load is POST /v1/visor/models/{id}/load: loads the model (swapping others out as a request would) and answers
// once it is ready.
func (g *Gateway) load(w http.ResponseWriter, r *http.Request) {
	name, ok := g.resolve(r.PathValue("id"))
	if !ok {
		g.unknownModel(w, r.PathValue("id"))
		return
	}
	if err := g.Preload(r.Context(), name); err != nil {
		apiError(w, http.StatusServiceUnavailable, "server_error", "engine_unavailable", "", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, g.info(r.Context(), name))
}

// unload is POST /v1/visor/models/{id}/unload: stops the model's engine once its requests have finished.
func (g *Gateway) unload(w http.ResponseWriter, r *http.Request) {
	name, ok := g.resolve(r.PathValue("id"))
	if !ok {
		g.unknownModel(w, r.PathValue("id"))
		return
	}
	if g.byName[name].Remote {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "", "the model %q is a remote endpoint: there is nothing here to unload", name)
		return
	}
	if _, err := g.engines.Unload(r.Context(), name); err != nil {
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "", "unloading %q: %v", name, err)
		return
	}
	writeJSON(w, http.StatusOK, g.info(r.Context(), name))
}

// ready notes that a model's engine answered at url, where /v1/models may read its context length.
func (g *Gateway) ready(md Model, url string) {
	g.ctxMu.Lock()
	g.urls[md.Name] = url
	g.ctxMu.Unlock()
}

// readCtx reads a loaded server's context length (llama-server's /props) when the config gave none, once.
func (g *Gateway) readCtx(ctx context.Context, name string) {
	g.ctxMu.Lock()
	url, known := g.urls[name], g.ctx[name] > 0
	g.ctxMu.Unlock()
	if url == "" || known {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	root := strings.TrimSuffix(strings.TrimRight(url, "/"), "/v1")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, root+"/props", nil)
	if err != nil {
		return
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if n := gjson.GetBytes(b, "default_generation_settings.n_ctx").Int(); n > 0 {
		g.ctxMu.Lock()
		g.ctx[name] = n
		g.ctxMu.Unlock()
	}
}

func (g *Gateway) ctxSeen(name string) int64 {
	g.ctxMu.Lock()
	defer g.ctxMu.Unlock()
	return g.ctx[name]
}

// renamer writes answers with "model" set to the name the request used: llama-server reports its GGUF path
// (or its alias), a remote server its own name. Streams are written a line or an event at a time.
type renamer struct {
	http.ResponseWriter
	want []byte // the JSON string
}

func newRenamer(w http.ResponseWriter, name string) *renamer {
	b, _ := json.Marshal(name)
	return &renamer{ResponseWriter: w, want: b}
}

func (r *renamer) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("data: {")) {
		if out, ok := r.rename(b, 6); ok {
			if _, err := r.ResponseWriter.Write(out); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return r.ResponseWriter.Write(b)
}

// rename returns b with the top-level "model" of the JSON object at b[off:] replaced.
func (r *renamer) rename(b []byte, off int) ([]byte, bool) {
	m := gjson.GetBytes(b[off:], "model")
	if m.Type != gjson.String || m.Index <= 0 || m.Raw == string(r.want) {
		return nil, false
	}
	i := off + m.Index
	out := make([]byte, 0, len(b)+len(r.want))
	out = append(out, b[:i]...)
	out = append(out, r.want...)
	return append(out, b[i+len(m.Raw):]...), true
}

func (r *renamer) whole(b []byte) []byte {
	if out, ok := r.rename(b, 0); ok {
		return out
	}
	return b
}

func (r *renamer) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
