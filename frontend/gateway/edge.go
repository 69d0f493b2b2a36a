package gateway

import (
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/visorhq/visor/internal/httpguard"
)

// statusError writes msg in OpenAI's error shape with the type and code OpenAI's SDKs expect for status: the
// gateway's own refusals (httpguard's included) read like the API's, so every SDK shows the message rather than
// a bare status or a JSON parse failure.
func statusError(w http.ResponseWriter, status int, msg string) {
	typ, code := "invalid_request_error", ""
	switch status {
	case http.StatusUnauthorized:
		code = "invalid_api_key"
	case http.StatusForbidden:
		code = "forbidden"
	case http.StatusNotFound:
		code = "not_found"
	case http.StatusMethodNotAllowed:
		code = "method_not_allowed"
	case http.StatusRequestEntityTooLarge:
		code = "request_too_large"
	case http.StatusUnsupportedMediaType:
		code = "unsupported_media_type"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	}
	if status >= 500 {
		typ = "server_error"
	}
	apiError(w, status, typ, code, "", "%s", msg)
}

// route is one path the gateway serves, with its methods, so an unknown path is a 404 and a known one asked
// with another method a 405 naming the allowed ones, both in OpenAI's shape.
type route struct {
	pattern string // a ServeMux path pattern without the method
	methods []string
}

// A refused body is read (and dropped) before the 413 goes out: a client still sending when the connection
// closes sees a reset instead of the answer, and SDKs report a reset as a network error and retry. Reading is
// cheap next to the sending, so the bound is wide (a GiB, for half a minute); a client past it is cut off.
const (
	drainLimit = 1 << 30
	drainTime  = 30 * time.Second
)

// countingBody counts what the handlers read, so that a body refused halfway can be drained afterwards.
type countingBody struct {
	io.ReadCloser
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// edge is what runs before httpguard: CORS for the configured origins (a preflight carries no key, so it is
// answered here) and the draining of refused bodies.
func (g *Gateway) edge(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && g.cors[strings.ToLower(strings.TrimSuffix(o, "/"))] {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", o)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Retry-After, Content-Type")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
				if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
					h.Set("Access-Control-Allow-Headers", rh)
				}
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		} else if o != "" && r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			statusError(w, http.StatusForbidden, "the origin "+o+" may not call this gateway from a browser: "+
				"start it with --cors-origin "+o+" (or cors_origins: in its config) to allow it")
			return
		}
		var body *countingBody
		if r.Body != nil && r.Body != http.NoBody {
			body = &countingBody{ReadCloser: r.Body}
			r.Body = body
		}
		next.ServeHTTP(w, r)
		if body != nil && (r.ContentLength > httpguard.MaxBodyBytes || body.n > httpguard.MaxBodyBytes) &&
			r.ContentLength <= drainLimit {
			// Without a server-wide read timeout, a client that stops sending would hold the drain for good.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainTime))
			_, _ = io.CopyN(io.Discard, body, drainLimit-body.n)
		}
	})
}

// handle serves h at pattern (a path pattern) for each of methods, and notes the route for notFound.
func (g *Gateway) handle(pattern string, h http.HandlerFunc, methods ...string) {
	for _, m := range methods {
		g.mux.HandleFunc(m+" "+pattern, h)
	}
	g.paths.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	g.routes = append(g.routes, route{pattern: pattern, methods: methods})
}

// notFound answers every request no route matched: a 405 naming the methods for a known path asked with another
// method, else a 404 listing the routes.
func (g *Gateway) notFound(w http.ResponseWriter, r *http.Request) {
	if _, pat := g.paths.Handler(r); pat != "" {
		for _, rt := range g.routes {
			if rt.pattern == pat {
				w.Header().Set("Allow", strings.Join(rt.methods, ", "))
				statusError(w, http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+" is not served: use "+strings.Join(rt.methods, " or "))
				return
			}
		}
	}
	statusError(w, http.StatusNotFound, "no route "+r.Method+" "+r.URL.Path+": this gateway serves "+g.routeList())
}

func (g *Gateway) routeList() string {
	var s []string
	for _, rt := range g.routes {
		s = append(s, strings.Join(rt.methods, "|")+" "+rt.pattern)
	}
	return strings.Join(s, ", ")
}
