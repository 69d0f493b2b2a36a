package mcp

import (
	"errors"
	"fmt"
	"strings"
)

// ParseServer reads the command-line form of a server, "NAME=COMMAND ARGS…" (stdio) or "NAME=URL" (streamable
// HTTP, http:// or https://), as in `visor ask --mcp "fs=npx -y @modelcontextprotocol/server-filesystem ."`.
// Arguments split on spaces; single or double quotes keep spaces in one argument. Leading KEY=value words
// before the command set environment variables, as in a shell.
func ParseServer(s string) (ServerConfig, error) {
	name, rest, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return ServerConfig{}, fmt.Errorf("MCP server %q: want NAME=COMMAND ARGS… or NAME=URL, e.g. fs=mcp-server-fs /tmp", s)
	}
	words, err := splitWords(rest)
	if err != nil {
		return ServerConfig{}, fmt.Errorf("MCP server %s: %w", name, err)
	}
	cfg := ServerConfig{Name: name}
	for len(words) > 0 && isAssignment(words[0]) {
		cfg.Env = append(cfg.Env, words[0])
		words = words[1:]
	}
	if len(words) == 0 {
		return ServerConfig{}, fmt.Errorf("MCP server %s: no command or URL after %q", name, name+"=")
	}
	if strings.HasPrefix(words[0], "http://") || strings.HasPrefix(words[0], "https://") {
		if len(words) > 1 || len(cfg.Env) > 0 {
			return ServerConfig{}, fmt.Errorf("MCP server %s: a URL takes no arguments or environment: %q", name, rest)
		}
		cfg.URL = words[0]
		return cfg, nil
	}
	cfg.Command, cfg.Args = words[0], words[1:]
	return cfg, nil
}

func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	if !ok || k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// splitWords splits on unquoted whitespace; quotes group, a backslash outside single quotes escapes the next
// character. It is not a shell: no variables, globs or pipes.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote in %q", quote, s)
	}
	if escaped {
		return nil, errors.New("trailing backslash in " + fmt.Sprintf("%q", s))
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// Servers is a repeatable flag of servers, each given as ParseServer reads it (--mcp "name=command args…").
type Servers []ServerConfig

func (s *Servers) String() string {
	var names []string
	for _, sc := range *s {
		names = append(names, sc.Name)
	}
	return strings.Join(names, ",")
}
func (s *Servers) Set(v string) error {
	sc, err := ParseServer(v)
	if err != nil {
		return err
	}
	*s = append(*s, sc)
	return nil
}
