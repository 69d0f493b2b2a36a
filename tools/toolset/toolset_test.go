package toolset

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/visorhq/visor/tools"
)

// The tools that need an allow setting are accepted with it and refused without it, by the check and by Open
// alike, each refusal naming the setting that turns the tool on.
func TestCheckAndOpenAgree(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct {
		name string
		o    Options
		want string // "" when the tools open
	}{
		{"shell allowed", Options{Names: []string{"run_shell"}, Shell: []string{"ls"}}, ""},
		{"fetch allowed", Options{Names: []string{"fetch_url,list_dir"}, AllowFetch: true}, ""},
		{"shell not allowed", Options{Names: []string{"run_shell"}}, "--allow-shell"},
		{"fetch not allowed", Options{Names: []string{"fetch_url"}}, "--allow-fetch"},
		{"typo", Options{Names: []string{"list_dri"}}, `no built-in tool "list_dri" (did you mean list_dir?): choose from fetch_url, list_dir`},
		{"search without a store", Options{Names: []string{"session_search"}}, "--no-store"},
		{"shell path", Options{Names: []string{"run_shell"}, Shell: []string{"/bin/ls"}}, "not a program name"},
	} {
		c.o.Workspace = ws
		err := c.o.Check(false)
		reg, closeTools, oerr := Open(context.Background(), c.o, nil, nil)
		closeTools()
		if c.want == "" {
			if err != nil || oerr != nil {
				t.Errorf("%s: Check %v, Open %v", c.name, err, oerr)
				continue
			}
			for _, n := range c.o.names() {
				if _, ok := reg.Get(n); !ok {
					t.Errorf("%s: %s not registered", c.name, n)
				}
			}
			continue
		}
		var p *Problem
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &p) {
			t.Errorf("%s: Check %v, want a Problem saying %q", c.name, err, c.want)
		}
		if oerr == nil || !strings.Contains(oerr.Error(), c.want) {
			t.Errorf("%s: Open %v, want %q", c.name, oerr, c.want)
		}
	}
}

func TestWorkspaceMustBeAFolder(t *testing.T) {
	o := Options{Names: []string{tools.ListDirName}, Workspace: "/nope/ws"}
	var p *Problem
	if err := o.CheckWorkspace(); !errors.As(err, &p) || p.Setting != "workspace" || !strings.Contains(err.Error(), "/nope/ws: not a folder") {
		t.Fatalf("CheckWorkspace = %v", err)
	}
	if err := (Options{Workspace: "/nope/ws"}).CheckWorkspace(); err != nil {
		t.Fatalf("no built-in tools, yet the workspace was checked: %v", err)
	}
}
