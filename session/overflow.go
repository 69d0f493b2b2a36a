package session

import (
	"fmt"
	"sort"
	"strings"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/tools"
)

// overflowHint is what to add to the engine's "exceeds the available context size" refusal when tools are
// offered: every request carries their definitions, and MCP servers can describe dozens of tools at length, so
// a newcomer's first request could not fit before any message was long (issue 22: it was found out only from
// the server's 400, which names no tool). Empty when the refusal is another or no tool is offered.
func overflowHint(err error, reg *tools.Registry, nCtx int) string {
	if err == nil || reg == nil || !strings.Contains(err.Error(), "exceeds the available context size") {
		return ""
	}
	specs := reg.Specs()
	if len(specs) == 0 {
		return ""
	}
	size := 0
	servers := map[string]int{}
	var builtin []string
	for _, sp := range specs {
		size += len(sp.Name) + len(sp.Description) + len(sp.Parameters)
		if server, _, ok := strings.Cut(sp.Name, "__"); ok { // an MCP server's tools are named server__tool
			servers[server]++
		} else {
			builtin = append(builtin, sp.Name)
		}
	}
	var from []string
	for s, n := range servers {
		from = append(from, fmt.Sprintf("MCP server %s: %d", s, n))
	}
	sort.Strings(from)
	if len(builtin) > 0 {
		from = append(from, "built in: "+strings.Join(builtin, ", "))
	}
	ctx := "a larger context (--ctx, or ctx: in the agent file)"
	if nCtx > 0 {
		ctx = fmt.Sprintf("a context larger than its %d tokens (--ctx, or ctx: in the agent file)", nCtx)
	}
	return fmt.Sprintf(" (%s of tool definitions go with every request, about %d tokens, from %d tools — %s: offer fewer tools or give %s)",
		images.Size(size), size/4, len(specs), strings.Join(from, "; "), ctx)
}
