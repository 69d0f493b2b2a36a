package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Format selects which text forms count as tool calls.
type Format int

const (
	// Auto accepts every form this package knows, including a bare JSON call that is the whole message.
	Auto Format = iota
	// Hermes accepts <tool_call> blocks (JSON, Python-literal or XML bodies).
	Hermes
	// QwenXML accepts <tool_call> blocks and <function=NAME> blocks written without the wrapper.
	QwenXML
	// Gemma4 accepts <|tool_call>call:NAME{…}<tool_call|> blocks.
	Gemma4
	// GLM accepts GLM-4.5/4.7 <tool_call>NAME<arg_key>…</arg_key><arg_value>…</arg_value></tool_call> blocks (and
	// the other <tool_call> bodies).
	GLM
	// Mistral accepts [TOOL_CALLS] followed by NAME[ARGS]{…} or a JSON array of calls.
	Mistral
)

// ParseFormat maps the CLI spelling (auto, hermes, qwen-xml, gemma4, glm, mistral) to a Format.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "hermes":
		return Hermes, nil
	case "qwen-xml", "qwenxml", "qwen":
		return QwenXML, nil
	case "gemma4", "gemma-4", "gemma":
		return Gemma4, nil
	case "glm", "glm4", "glm-4.5", "glm-4.7":
		return GLM, nil
	case "mistral":
		return Mistral, nil
	}
	return Auto, fmt.Errorf("unknown tool-call format %q (want auto, hermes, qwen-xml, gemma4, glm or mistral)", s)
}

func (f Format) String() string {
	switch f {
	case Hermes:
		return "hermes"
	case QwenXML:
		return "qwen-xml"
	case Gemma4:
		return "gemma4"
	case GLM:
		return "glm"
	case Mistral:
		return "mistral"
	}
	return "auto"
}

// Kind says what an Event carries. It is 32 bits so that Event.Shown packs beside it: a streamed message makes an
// Event slice per chunk.
type Kind int32

const (
	// KindContent is answer text meant for the user.
	KindContent Kind = iota + 1
	// KindReasoning is thinking text (from <think> in content, or the reasoning channel).
	KindReasoning
	// KindCall is a complete, executable tool call.
	KindCall
	// KindReasoningCall is a complete call written inside thinking. It must not be executed; the agent may tell the
	// model to close its thinking and call again.
	KindReasoningCall
	// KindError is a call that could not be parsed; Text holds the offending text.
	KindError
)

func (k Kind) String() string {
	switch k {
	case KindContent:
		return "content"
	case KindReasoning:
		return "reasoning"
	case KindCall:
		return "call"
	case KindReasoningCall:
		return "reasoning-call"
	case KindError:
		return "error"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Sentinel errors wrapped by KindError events.
var (
	// ErrMalformed: the text between the tags is not a call this package can read.
	ErrMalformed = errors.New("malformed tool call")
	// ErrUnclosed: the stream ended inside a call (typically finish_reason "length").
	ErrUnclosed = errors.New("unfinished tool call")
	// ErrTooLarge: an unclosed tag held more than MaxPending bytes; its text was dropped.
	ErrTooLarge = errors.New("tool call exceeds the pending-buffer cap")
	// ErrLateThinkClose: </think> arrived with no <think> before it, after calls were already emitted: the
	// generation began inside thinking (set StartInThinking), so those calls were thinking and must not run.
	ErrLateThinkClose = errors.New("</think> without <think>")
)

// DefaultMaxPending caps the bytes held for one unfinished tag.
const DefaultMaxPending = 1 << 20

// Call is one tool call found in text.
type Call struct {
	ID        string          // parser-assigned, "call_N", unique within one message
	Name      string          //
	Arguments json.RawMessage // always a JSON object; numbers keep the digits the model wrote
	Raw       string          // the text the call was read from
	// Repaired names the lenient fixes that were needed (single quotes, raw newlines, …); empty when the text was
	// valid as written. The agent may prefer to bounce repaired calls back to the model.
	Repaired string

	// guessed holds, per argument, the raw text of XML values that were typed as JSON by guess (e.g. "42"); a tool
	// schema that says "string" turns them back into strings without loss.
	guessed map[string]string
	// explicitArgs: a JSON call named its "arguments" key (rather than "parameters" or nothing).
	explicitArgs bool
}

// Event is one piece of parser output, emitted as soon as it is complete.
type Event struct {
	Kind Kind
	// Shown (KindError): Text was also emitted as content, just before, because it stays part of the answer (a
	// block that holds no call). A front end that shows error text must not show it twice.
	Shown bool
	Text  string // content or reasoning text; for KindError the offending text
	Call  *Call  // KindCall and KindReasoningCall
	Err   error  // KindError
}

// Parser splits a streamed assistant message into content, reasoning and tool calls. The zero value is not ready;
// use New. A Parser is not safe for concurrent use. After Close it is reset and may parse another message.
type Parser struct {
	// StartInThinking says the prompt already opened the reasoning block (Qwen3.5/3.6 templates end the prompt with
	// "<think>\n", Magistral's system prompt forces [THINK]), so content is reasoning until the dialect's closer
	// (</think>, [/THINK], <channel|>). Set it before the first Feed.
	StartInThinking bool
	// MaxPending caps the bytes held for one unfinished tag; 0 means DefaultMaxPending.
	MaxPending int

	format    Format
	d         *dialect
	tools     *ToolSet
	content   stream
	reasoning stream
	started   bool
	nextID    int
	out       []Event
	pend      []byte // text of the last, still growing content or reasoning event
	pendKind  Kind
}

// CallParser is what every dialect's parser offers, in the shape of Ollama's model/parsers: Init with the
// offered tools, then Add each streamed chunk, with done set on the last one. *Parser implements it for every
// Format; the dialects share the streaming scanner and differ in the blocks they read.
type CallParser interface {
	Init(tools *ToolSet)
	Add(chunk string, done bool) []Event
}

var _ CallParser = (*Parser)(nil)

// New returns a Parser for one assistant message in format f.
func New(f Format) *Parser {
	if f < Auto || f > Mistral {
		f = Auto
	}
	p := &Parser{format: f, d: dialects[f]}
	p.reset()
	return p
}

// Init gives the parser the tools offered to the model (nil for none known) and resets it. Each argument is then
// typed from its tool's schema as it is parsed, and a bare JSON message only counts as a call when it names one
// of them.
func (p *Parser) Init(tools *ToolSet) {
	p.tools = tools
	p.reset()
}

// Add feeds the next content chunk; done ends the message (see Close).
func (p *Parser) Add(chunk string, done bool) []Event {
	ev := p.Feed(chunk)
	if done {
		ev = append(ev, p.Close()...)
	}
	return ev
}

func (p *Parser) reset() {
	p.content = stream{hold: holdLead}
	p.reasoning = stream{reasoningOnly: true, mode: modeThink}
	p.started = false
	p.nextID = 0
	p.out, p.pend = nil, p.pend[:0]
}

// Feed consumes the next chunk of the content channel and returns the events it completed.
func (p *Parser) Feed(content string) []Event {
	p.start()
	p.content.buf = append(p.content.buf, content...)
	p.run(&p.content, false)
	return p.flush()
}

// FeedReasoning consumes the next chunk of the reasoning_content channel. Everything in it is reasoning; complete
// calls in it come out as KindReasoningCall, never KindCall.
func (p *Parser) FeedReasoning(s string) []Event {
	p.start()
	p.reasoning.buf = append(p.reasoning.buf, s...)
	p.run(&p.reasoning, false)
	return p.flush()
}

// Close ends the message: held-back text is released and an unfinished call becomes a KindError event (or a call,
// when its body is complete and only the closing tag is missing). The Parser is then reset.
func (p *Parser) Close() []Event {
	p.start()
	p.run(&p.reasoning, true)
	p.run(&p.content, true)
	p.closeHold(&p.content)
	ev := p.flush()
	p.reset()
	return ev
}

func (p *Parser) start() {
	if !p.started {
		p.started = true
		if p.StartInThinking {
			p.content.mode = modeThink
			if p.format == Gemma4 {
				// The prompt ended with <|channel>: the channel's name comes first.
				p.content.label = thinkGemma.label
			}
		}
	}
}

func (p *Parser) flush() []Event {
	p.settle()
	ev := p.out
	p.out = nil
	return ev
}

func (p *Parser) maxPending() int {
	if p.MaxPending > 0 {
		return p.MaxPending
	}
	return DefaultMaxPending
}

// Result is a whole message, split.
type Result struct {
	Content        string
	Reasoning      string
	Calls          []Call
	ReasoningCalls []Call // found inside thinking: report, never execute
	Errors         []string
}

// Collect folds events into a Result; content and reasoning are trimmed of surrounding whitespace.
func Collect(events []Event) Result {
	var r Result
	var content, reasoning strings.Builder
	for _, e := range events {
		switch e.Kind {
		case KindContent:
			content.WriteString(e.Text)
		case KindReasoning:
			reasoning.WriteString(e.Text)
		case KindCall:
			r.Calls = append(r.Calls, *e.Call)
		case KindReasoningCall:
			r.ReasoningCalls = append(r.ReasoningCalls, *e.Call)
		case KindError:
			r.Errors = append(r.Errors, e.Err.Error())
		}
	}
	r.Content = strings.TrimSpace(content.String())
	r.Reasoning = strings.TrimSpace(reasoning.String())
	return r
}

// Parse splits a complete message. Unlike a streaming Parser it can see the whole text, so it also detects a
// message that starts inside thinking (a </think> with no <think> before it).
func Parse(text string, f Format) Result {
	return ParseWith(text, f, nil)
}

// ParseWith is Parse with the offered tools, whose schemas type each argument (see Parser.Init).
func ParseWith(text string, f Format, tools *ToolSet) Result {
	p := New(f)
	p.Init(tools)
	p.StartInThinking = p.d.opensInThinking(text)
	ev := p.Feed(text)
	return Collect(append(ev, p.Close()...))
}

// LooksLikeCalls reports whether text (an assistant message's content or reasoning_content) contains something
// that was meant as a tool call: a parsed call, a call inside thinking, or a call that failed to parse. The agent
// uses it to notice a server that left calls in text while tool_calls came back empty.
func LooksLikeCalls(text string) bool {
	t := strings.TrimSpace(text)
	if t == "" {
		return false
	}
	if !strings.Contains(t, "<") && t[0] != '{' && t[0] != '[' && !strings.HasPrefix(t, "```") {
		return false
	}
	r := Parse(text, Auto)
	return len(r.Calls)+len(r.ReasoningCalls)+len(r.Errors) > 0
}
