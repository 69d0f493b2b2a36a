package mcp_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/tools/mcp"
)

func TestParseServer(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want mcp.ServerConfig
	}{
		{"fs=mcp-server-fs /tmp", mcp.ServerConfig{Name: "fs", Command: "mcp-server-fs", Args: []string{"/tmp"}}},
		{`git=uvx mcp-server-git --repository "/my repo"`, mcp.ServerConfig{Name: "git", Command: "uvx",
			Args: []string{"mcp-server-git", "--repository", "/my repo"}}},
		{"gh=TOKEN=abc DEBUG=1 gh-mcp 'a b' c\\ d", mcp.ServerConfig{Name: "gh", Command: "gh-mcp",
			Env: []string{"TOKEN=abc", "DEBUG=1"}, Args: []string{"a b", "c d"}}},
		{"web=http://127.0.0.1:8080/mcp", mcp.ServerConfig{Name: "web", URL: "http://127.0.0.1:8080/mcp"}},
		{"x=run --opt=1", mcp.ServerConfig{Name: "x", Command: "run", Args: []string{"--opt=1"}}},
	} {
		got, err := mcp.ParseServer(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseServer(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "noequals", "=cmd", "fs=", "fs=  ", `fs=cmd "open`, "web=https://h/mcp extra", "a b=cmd"} {
		if got, err := mcp.ParseServer(bad); err == nil {
			t.Errorf("ParseServer(%q) = %+v, want an error", bad, got)
		}
	}
}

// The URL of an MCP server may carry credentials; a failed connect must not print them.
func TestConnectErrorRedactsCredentials(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := mcp.Connect(ctx, mcp.ServerConfig{Name: "x", URL: "http://alice:s3cret@127.0.0.1:1/mcp"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
		t.Fatalf("connect error: %v", err)
	}
}
