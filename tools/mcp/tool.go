package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/tools"
)

// maxName is the Registry's limit on tool names (the OpenAI function-name rule).
const maxName = 64

// tool is one of the server's tools as the Registry sees it.
type tool struct {
	client *Client
	remote string // the name the server knows
	spec   tools.Spec
}

func (t *tool) Spec() tools.Spec { return t.spec }

func (t *tool) Call(ctx context.Context, args json.RawMessage) tools.Result {
	return t.client.call(ctx, t.remote, args)
}

// wrap turns the listed tools into Registry tools with local names that are unique and valid.
func (c *Client) wrap(remote []*sdk.Tool) ([]tools.Tool, error) {
	prefix := c.cfg.Prefix
	if prefix == "" && !c.cfg.NoPrefix {
		prefix = sanitize(c.cfg.Name) + "__"
	}
	if c.cfg.NoPrefix {
		prefix = ""
	}
	seen := map[string]string{}
	out := make([]tools.Tool, 0, len(remote))
	for _, r := range remote {
		name := localName(prefix, r.Name)
		if prev, ok := seen[name]; ok {
			// Two remote names that differ only in characters the Registry refuses would collide; the hash
			// of the remote name keeps both callable.
			name = hashed(name, r.Name)
			if _, again := seen[name]; again {
				return nil, fmt.Errorf("MCP server %s: tools %q and %q map to the same name %q: set a different Prefix",
					c.cfg.Name, prev, r.Name, name)
			}
		}
		seen[name] = r.Name
		params, err := schemaOf(r.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: tool %s: input schema: %w", c.cfg.Name, r.Name, err)
		}
		desc := r.Description
		if desc == "" {
			desc = r.Title
		}
		spec := tools.Spec{Name: name, Description: desc, Parameters: params, Timeout: c.cfg.Timeout,
			ReturnsImages: c.cfg.ReturnsImages}
		// Only a tool the server promises does not change anything may run beside other calls; an MCP server
		// is often one process with shared state, so the default is one call at a time.
		if a := r.Annotations; a != nil && a.ReadOnlyHint {
			spec.Parallel = true
		}
		out = append(out, &tool{client: c, remote: r.Name, spec: spec})
	}
	return out, nil
}

func schemaOf(s any) (json.RawMessage, error) {
	if s == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	return json.Marshal(s)
}

// localName joins prefix and the remote name within the Registry's name rule.
func localName(prefix, remote string) string {
	name := prefix + sanitize(remote)
	if len(name) > maxName {
		return hashed(name, remote)
	}
	return name
}

// hashed shortens name to fit maxName with a suffix derived from the remote name, so long or clashing names
// stay distinct and stable across runs (the prompt prefix cache depends on stable tool names).
func hashed(name, remote string) string {
	h := fnv.New32a()
	h.Write([]byte(remote))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	if len(name)+len(suffix) > maxName {
		name = name[:maxName-len(suffix)]
	}
	return name + suffix
}

// sanitize maps every character outside [a-zA-Z0-9_-] to '_': MCP allows dots and slashes in tool names,
// llama-server's templates and the Registry do not.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// call runs tools/call. Every failure becomes an error Result naming the server, worded for the model.
func (c *Client) call(ctx context.Context, remote string, args json.RawMessage) tools.Result {
	cn, err := c.live(ctx)
	if err != nil {
		return tools.Errorf("MCP server %q is not available, so tool %q was not run: %v", c.cfg.Name, remote, err)
	}
	params := &sdk.CallToolParams{Name: remote}
	if len(args) > 0 {
		params.Arguments = args
	}
	res, err := cn.sess.CallTool(ctx, params)
	if errors.Is(err, sdk.ErrSessionMissing) && ctx.Err() == nil {
		// An HTTP server that restarted forgot our session and refused the call without running it, so
		// calling again on a new session is safe.
		c.logger.Warn("MCP server lost the session; reconnecting", "server", c.cfg.Name, "err", err)
		if rerr := c.restart(ctx, cn); rerr != nil {
			return tools.Errorf("MCP server %q lost the session and could not be reconnected, so tool %q was not run: %v",
				c.cfg.Name, remote, rerr)
		}
		if cn, err = c.live(ctx); err == nil {
			res, err = cn.sess.CallTool(ctx, params)
		}
	}
	if err == nil {
		return convert(c.cfg.Name, remote, res)
	}
	if ctx.Err() != nil {
		return tools.Errorf("MCP server %q: tool %q did not finish: %v", c.cfg.Name, remote, context.Cause(ctx))
	}
	if errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || cn.dead() {
		// The server went away during the call. Restart it for the next call but do not repeat this one: it
		// may already have had its effect.
		stderr := cn.stderr.note()
		if rerr := c.restart(context.WithoutCancel(ctx), cn); rerr != nil {
			return tools.Errorf("MCP server %q stopped during tool %q (%v%s) and could not be restarted: %v",
				c.cfg.Name, remote, err, stderr, rerr)
		}
		return tools.Errorf("MCP server %q stopped during tool %q (%v%s). It was restarted; the call may or may not "+
			"have taken effect, so check before calling it again.", c.cfg.Name, remote, err, stderr)
	}
	return tools.Errorf("MCP server %q: tool %q failed: %v", c.cfg.Name, remote, err)
}

// convert maps MCP content to a Result: text joins in order, images keep their exact bytes, and content the
// model cannot use (audio, binary resources) is named rather than silently dropped.
func convert(server, remote string, res *sdk.CallToolResult) tools.Result {
	var out tools.Result
	var texts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *sdk.TextContent:
			texts = append(texts, v.Text)
		case *sdk.ImageContent:
			out.Images = append(out.Images, tools.Image{MIME: v.MIMEType, Data: v.Data})
		case *sdk.AudioContent:
			texts = append(texts, fmt.Sprintf("[audio %s, %d bytes, not shown]", v.MIMEType, len(v.Data)))
		case *sdk.ResourceLink:
			texts = append(texts, fmt.Sprintf("[resource %s: %s]", v.Name, v.URI))
		case *sdk.EmbeddedResource:
			r := v.Resource
			switch {
			case r == nil:
			case r.Text != "":
				texts = append(texts, fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
			case strings.HasPrefix(r.MIMEType, "image/") && len(r.Blob) > 0:
				out.Images = append(out.Images, tools.Image{MIME: r.MIMEType, Data: r.Blob})
			default:
				texts = append(texts, fmt.Sprintf("[resource %s (%s, %d bytes) not shown]", r.URI, r.MIMEType, len(r.Blob)))
			}
		default:
			texts = append(texts, fmt.Sprintf("[%T content not shown]", ct))
		}
	}
	if len(texts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			texts = append(texts, string(b))
		}
	}
	out.Text = strings.Join(texts, "\n")
	out.IsError = res.IsError
	if out.IsError && out.Text == "" {
		out.Text = fmt.Sprintf("MCP server %q: tool %q reported an error without a message.", server, remote)
	}
	return out
}
