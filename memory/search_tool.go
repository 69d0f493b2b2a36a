package memory

import (
	"context"
	_ "embed"
	"fmt"
	"strings"

	"github.com/visorhq/visor/tools"
)

//go:embed search_tool.md
var sessionSearchDescription string

// SearchToolName is the session_search tool's name.
const SearchToolName = "session_search"

// Searcher is what session_search needs; *Store implements it.
type Searcher interface {
	Search(ctx context.Context, q Query) ([]Hit, error)
}

type sessionSearchIn struct {
	Query string `json:"query" jsonschema_description:"Words to look for."`
	Role  string `json:"role,omitempty" jsonschema:"enum=user,enum=assistant,enum=tool" jsonschema_description:"Only messages of this role."`
	Limit int    `json:"limit,omitempty" jsonschema:"default=5,minimum=1,maximum=20" jsonschema_description:"Most results."`
}

// SearchTool returns the session_search tool over store, for agents. Agent, when set, limits results to one
// agent's sessions, so one agent does not read another's memory by accident. It lives here rather than in tools
// so that tools stays free of SQLite.
func SearchTool(store Searcher, agent string) tools.Tool {
	return tools.New(SearchToolName, strings.TrimSpace(sessionSearchDescription), func(ctx context.Context, in sessionSearchIn) (string, error) {
		limit := in.Limit
		if limit == 0 {
			limit = 5
		}
		hits, err := store.Search(ctx, Query{Text: in.Query, Role: in.Role, Agent: agent, Limit: limit})
		if err != nil {
			return "", fmt.Errorf("search %q: %w", in.Query, err)
		}
		if len(hits) == 0 {
			return fmt.Sprintf("No stored messages match %q.", in.Query), nil
		}
		var b strings.Builder
		for i, h := range hits {
			fmt.Fprintf(&b, "%d. session %s (%s), %s, %s:\n   %s\n", i+1, h.SessionID, h.SessionTitle, h.Role,
				h.CreatedAt.Format("2006-01-02 15:04"), strings.Join(strings.Fields(h.Snippet), " "))
		}
		return b.String(), nil
	}, tools.Parallel())
}
