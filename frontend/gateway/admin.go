package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Admin is `visor gateway running|load NAME|unload NAME`: the management API (/v1/visor/...) of the gateway at
// base, called with key (if any), its answer written to stdout as lines. names are the command's arguments.
func Admin(ctx context.Context, base, key, verb string, names []string, stdout io.Writer) error {
	method, path := http.MethodGet, "/v1/visor/running"
	if verb != "running" {
		if len(names) != 1 {
			return fmt.Errorf("gateway %s NAME: name one model (visor gateway running lists the loaded ones)", verb)
		}
		method, path = http.MethodPost, "/v1/visor/models/"+url.PathEscape(names[0])+"/"+verb
	} else if len(names) != 0 {
		return errors.New("gateway running takes no arguments: visor gateway running [--url URL]")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("--url %q: %w", base, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("the gateway at %s did not answer (is `visor gateway` running there? --url names another): %w", base, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error struct{ Message string } }
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("gateway %s: %s", verb, e.Error.Message)
		}
		return fmt.Errorf("gateway %s: HTTP %d: %.300s", verb, resp.StatusCode, b)
	}
	type entry struct {
		ID             string   `json:"id"`
		State          string   `json:"state"`
		Inflight       int      `json:"inflight"`
		LoadingSeconds *float64 `json:"loading_seconds"`
	}
	line := func(m entry) {
		s := m.ID + "\t" + m.State
		if m.LoadingSeconds != nil {
			s += fmt.Sprintf(" (%.0f s)", *m.LoadingSeconds)
		}
		if m.Inflight > 0 {
			s += fmt.Sprintf("\t%d requests", m.Inflight)
		}
		fmt.Fprintln(stdout, s)
	}
	if verb != "running" {
		var m entry
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("gateway %s: the answer %.200q is not a model: %w", verb, b, err)
		}
		line(m)
		return nil
	}
	var list struct{ Data []entry }
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("gateway running: the answer %.200q is not a list: %w", b, err)
	}
	if len(list.Data) == 0 {
		fmt.Fprintln(stdout, "no model is loaded")
	}
	for _, m := range list.Data {
		line(m)
	}
	return nil
}
