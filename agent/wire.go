package agent

import (
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/prompts"
	"github.com/visorhq/visor/tools"
)

// request renders the conversation for the wire. History stays append-only and images keep their exact bytes,
// so each request's prefix matches the previous one and llama-server reuses its cache (images included).
func (a *Agent) request(msgs []Message) engine.Request { return a.requestExpecting(msgs, 0) }

// requestExpecting renders msgs as the prefix of a request that will add expect more images: the image window
// counts them, so a prefill made now leaves the cache holding exactly what that request starts with.
func (a *Agent) requestExpecting(msgs []Message, expect int) engine.Request {
	specs := a.cfg.Tools.Specs()
	req := engine.Request{Extra: a.cfg.Extra}
	req.Model = a.cfg.ModelID
	// max_tokens, not max_completion_tokens: llama-server, vLLM and SGLang all read it, and it is what OpenAI
	// deprecated only for its o1 models.
	req.MaxTokens = a.cfg.MaxTokens //nolint:staticcheck // see above
	if a.cfg.Temperature != nil {
		// go-openai omits a zero temperature, which is the one users set most; send it as an extra field.
		fields := map[string]any{"temperature": *a.cfg.Temperature}
		for k, v := range a.cfg.Extra.Fields {
			fields[k] = v
		}
		req.Extra.Fields = fields
	}
	system := a.cfg.System
	raw := a.cfg.Mode == Raw && len(specs) > 0
	if raw {
		system = a.rawSystem(specs)
	}
	if system != "" {
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: "system", Content: system})
	}
	if len(specs) > 0 && !raw {
		for _, s := range specs {
			req.Tools = append(req.Tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
				Name: s.Name, Description: s.Description, Parameters: s.Parameters}})
		}
		req.ToolChoice = a.cfg.ToolChoice
		if a.cfg.ParallelToolCalls {
			req.ParallelToolCalls = true
		}
	}
	// The window's stubs replace the oldest images in the request only; msgs keep them.
	stubs := a.cfg.ImageWindow.stubbed(msgs, expect)
	stubbed := func(i int) int {
		if stubs == nil {
			return 0
		}
		return stubs[i]
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case "tool":
			// A run of tool results becomes tool messages (native) or one user turn of <tool_response> blocks
			// (raw); images follow in a user message because tool messages cannot carry them.
			j := i
			for j < len(msgs) && msgs[j].Role == "tool" {
				j++
			}
			var cut []int
			if stubs != nil {
				cut = stubs[i:j]
			}
			req.Messages = append(req.Messages, a.toolResults(&req, msgs[i:j], cut, raw)...)
			i = j - 1
		case "assistant":
			req.Messages = append(req.Messages, a.assistant(m, raw))
		default:
			req.Messages = append(req.Messages, a.userLike(&req, m.Role, m.Content, m.Images, stubbed(i)))
		}
	}
	return req
}

func (a *Agent) rawSystem(specs []tools.Spec) string {
	ps := make([]prompts.ToolSpec, len(specs))
	for i, s := range specs {
		ps[i] = prompts.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters}
	}
	out, err := prompts.ToolSystem(promptFormat(a.cfg.Format), a.cfg.System, ps)
	if err != nil {
		// The templates are embedded and tested; failing here means a broken build, and the model can still
		// work without the tool list, so log instead of failing the user's run.
		a.cfg.Logger.Error("render tool prompt", "err", err)
		return a.cfg.System
	}
	return out
}

func (a *Agent) assistant(m Message, raw bool) openai.ChatCompletionMessage {
	out := openai.ChatCompletionMessage{Role: "assistant", Content: m.Content, ReasoningContent: m.Reasoning}
	if raw && m.Raw != "" {
		out.Content = m.Raw
		return out
	}
	if raw {
		var b strings.Builder
		b.WriteString(m.Content)
		for _, c := range m.ToolCalls {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(prompts.ToolCall(promptFormat(a.cfg.Format), c.Name, c.Arguments))
		}
		out.Content = b.String()
		return out
	}
	if out.Content == "" && len(m.ToolCalls) == 0 {
		// Servers reject an assistant turn with neither content nor calls; this one held only unusable call
		// text, which the model should see to correct it.
		out.Content = m.Raw
		if out.Content == "" {
			out.Content = "(no answer)"
		}
	}
	for _, c := range m.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, openai.ToolCall{ID: c.ID, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: c.Name, Arguments: string(c.Arguments)}})
	}
	return out
}

// toolResults renders a run of tool results; stubs (nil: none) says how many of each result's first images the
// image window leaves out.
func (a *Agent) toolResults(req *engine.Request, run []Message, stubs []int, raw bool) []openai.ChatCompletionMessage {
	// With tool-image lookahead on (a llama-server feature) each result's images follow that result at once,
	// before the results after it: the loop appends parallel results in the order they finish, so an image a fast
	// tool returned is then a prefix of the next request while slower tools still run, and can be prefilled
	// (Agent.PrefillHistory). Otherwise the images of the whole run follow it, because strict OpenAI-compatible
	// servers want the tool messages of one turn adjacent.
	split := a.cfg.OnImagesReady != nil || a.cfg.PrefillToolImages
	var out []openai.ChatCompletionMessage
	var images []tools.Image
	var captions []string
	var body strings.Builder
	cut := 0 // of images, the first cut are left out (they are the oldest: a run's stubs come first)
	flush := func() {
		switch {
		case raw && (body.Len() > 0 || len(images) > 0):
			out = append(out, a.userLike(req, "user", body.String(), images, cut))
		case !raw && len(images) > 0:
			out = append(out, a.userLike(req, "user", "Images returned by the tools above: "+strings.Join(captions, "; "), images, cut))
		}
		body.Reset()
		images, captions, cut = nil, nil, 0
	}
	for k, m := range run {
		if stubs != nil {
			cut += stubs[k]
		}
		if raw {
			body.WriteString(prompts.ToolResponse(promptFormat(a.cfg.Format), m.ToolName, toolText(m)))
		} else {
			out = append(out, openai.ChatCompletionMessage{Role: "tool", ToolCallID: m.ToolCallID, Name: m.ToolName,
				Content: toolText(m)})
		}
		if len(m.Images) > 0 {
			images = append(images, m.Images...)
			captions = append(captions, fmt.Sprintf("%d image(s) from %s (call %s)", len(m.Images), m.ToolName, m.ToolCallID))
			if split {
				flush()
			}
		}
	}
	flush()
	return out
}

// toolText is a tool message's content, never empty: an empty content is left out of the JSON (go-openai's
// omitempty), and llama-server refuses the whole request then ("All non-assistant messages must contain
// 'content'"), which a tool that returns only an image, or nothing, would otherwise cause.
func toolText(m Message) string {
	switch {
	case m.Content != "":
		return m.Content
	case len(m.Images) == 1:
		return "(no text: the tool returned 1 image, attached below)"
	case len(m.Images) > 1:
		return fmt.Sprintf("(no text: the tool returned %d images, attached below)", len(m.Images))
	}
	return "(the tool returned nothing)"
}

// userLike renders a user-role message with its images, the first stubbed of them left out for the image
// window's stub. Each image part is registered with req (engine.Request.AddImage), so its data URL is encoded
// once per image, not once per request.
func (a *Agent) userLike(req *engine.Request, role, content string, images []tools.Image, stubbed int) openai.ChatCompletionMessage {
	if len(images) == 0 {
		return openai.ChatCompletionMessage{Role: role, Content: content}
	}
	// Images go first and a newline always follows them, then the text: a prefill of the images (Agent.Prefill)
	// ends at that newline, which is where this message continues whatever its text. Leading whitespace of the
	// text is dropped because tokenizers merge it with the newline, which would move the token boundary.
	text := "\n" + strings.TrimLeft(content, " \t\r\n")
	stubbed = min(stubbed, len(images))
	if stubbed == len(images) {
		// Every image left out: the stubs and the text, as plain content. The message renders this way in
		// every later request too, since the window only ever leaves more images out.
		return openai.ChatCompletionMessage{Role: role, Content: stubText(stubbed) + text}
	}
	parts := []openai.ChatMessagePart{}
	if stubbed > 0 {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: stubText(stubbed)})
	}
	for _, im := range images[stubbed:] {
		parts = append(parts, req.AddImage(a.cfg.Images, im.MIME, im.Data))
	}
	parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: text})
	return openai.ChatCompletionMessage{Role: role, MultiContent: parts}
}

// promptFormat is the prompt that teaches the syntax f parses; auto gets Hermes.
func promptFormat(f toolcall.Format) prompts.Format {
	if f == toolcall.Auto {
		return prompts.Hermes
	}
	return prompts.Format(f.String())
}
