package web

import (
	"errors"
	"net/http"

	"github.com/visorhq/visor/agent"
	"github.com/visorhq/visor/session"
)

// The chat list as a person manages it: rename, delete and search, all through the session service (which
// owns the store), under the same guard as every other request: a state change needs the page's token.

// rename takes {"title": "…"}.
func (s *Server) rename(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var in struct {
		Title string `json:"title"`
	}
	if status, why := decodeJSON(w, r, 4<<10, &in, `{"title": "the new title"}`); status != 0 {
		httpError(w, status, "%s", why)
		return
	}
	title, err := s.cfg.Sessions.Rename(r.Context(), id, in.Title)
	if err != nil {
		httpError(w, manageStatus(err), "%v", err)
		return
	}
	writeJSON(w, map[string]string{"session": id, "title": title})
}

// remove deletes a stored session (and what continues it), and forgets the chat if this server holds it.
func (s *Server) remove(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	if c := s.sessions[id]; c != nil {
		if c.busy > 0 {
			s.mu.Unlock()
			httpError(w, http.StatusConflict, "chat %q is answering: stop it first, then delete it", id)
			return
		}
		s.drop(id, c, "deleted")
	}
	s.mu.Unlock()
	deleted, err := s.cfg.Sessions.Delete(r.Context(), id)
	if err != nil {
		httpError(w, manageStatus(err), "%v", err)
		return
	}
	writeJSON(w, map[string]any{"deleted": deleted})
}

// maxQuery bounds a search's text.
const maxQuery = 512

// search answers GET /api/sessions?q=… with the stored sessions whose title or messages match.
func (s *Server) search(w http.ResponseWriter, r *http.Request, q string) {
	// The full-text query's time grows with its words (24,000 took 4 s): a search is a few words.
	if len(q) > maxQuery {
		httpError(w, http.StatusBadRequest, "the search is %d bytes: search for at most %d (a few words from a chat's "+
			"title or messages)", len(q), maxQuery)
		return
	}
	found, err := s.cfg.Sessions.Search(r.Context(), q, 50)
	if errors.Is(err, session.ErrBadInput) {
		httpError(w, http.StatusBadRequest, "search %q: %v: type a word (letters or digits) from a chat's title or messages", q, err)
		return
	}
	if err != nil {
		httpError(w, manageStatus(err), "%v", err)
		return
	}
	type hit struct {
		ID      string `json:"id"`
		Title   string `json:"title"`
		Snippet string `json:"snippet,omitempty"`
	}
	out := []hit{}
	for _, f := range found {
		out = append(out, hit{ID: f.ID, Title: f.Title, Snippet: f.Snippet})
	}
	writeJSON(w, map[string]any{"sessions": out, "query": q})
}

func manageStatus(err error) int {
	switch {
	case errors.Is(err, session.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, session.ErrBusy):
		return http.StatusConflict
	case errors.Is(err, session.ErrBadInput):
		return http.StatusBadRequest
	case errors.Is(err, session.ErrNoStore):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// turnEnd is what the page's line under an answer says about its turn, kept so a reload shows it again.
type turnEnd struct {
	Steps           int     `json:"steps"`
	TokensPerSecond float64 `json:"tokens_per_second,omitempty"`
	CachedTokens    int     `json:"cached_tokens"`
	PromptTokens    int     `json:"prompt_tokens,omitempty"`
}

// turnEnds gives, for each message of history that ends a turn (its last assistant message before the next
// person's message), the turn's line: steps are its model requests, the numbers its final request's.
func turnEnds(history []agent.Message) map[int]turnEnd {
	out := map[int]turnEnd{}
	last, steps := -1, 0
	flush := func() {
		if last >= 0 {
			e := turnEnd{Steps: steps}
			if t := history[last].Timings; t != nil {
				e.TokensPerSecond, e.CachedTokens, e.PromptTokens = t.PredictedPerSecond, t.CacheN, t.PromptN
			}
			out[last] = e
		}
		last, steps = -1, 0
	}
	for i, m := range history {
		switch {
		case m.Role == "user" && !m.IsError:
			flush()
		case m.Role == "assistant":
			last, steps = i, steps+1
		}
	}
	flush()
	return out
}
