package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// cmdGatewayAdmin is `visor gateway running|load NAME|unload NAME`: the gateway's management API
// (/v1/visor/...) from the command line.
func cmdGatewayAdmin(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gateway "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "the gateway's address (its key, if any, from "+serveKeyEnv+")")
	// The name may come before the flags (visor gateway load qwen --url …).
	var pos []string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pos, args = args[:1], args[1:]
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pos = append(pos, fs.Args()...)
	method, path := http.MethodGet, "/v1/visor/running"
	if verb != "running" {
		if len(pos) != 1 {
			return fmt.Errorf("visor gateway %s NAME: name one model (visor gateway running lists the loaded ones)", verb)
		}
		method, path = http.MethodPost, "/v1/visor/models/"+url.PathEscape(pos[0])+"/"+verb
	} else if len(pos) != 0 {
		return errors.New("visor gateway running takes no arguments")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("--url %q: %w", *base, err)
	}
	if k := os.Getenv(serveKeyEnv); k != "" {
		req.Header.Set("Authorization", "Bearer "+k)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("the gateway at %s did not answer (is `visor gateway` running there? --url names another): %w", *base, err)
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
