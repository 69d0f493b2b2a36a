package toolcall

import (
	"errors"
	"fmt"
	"strings"
)

// blockSyntax is one kind of call block, as the shared scanner sees it: the tag that opens it and how its end
// is found. What the body means is parseBlock's business.
type blockSyntax struct {
	open string
	ends []string // tags that may end the block
	// nest: call tags that open at the start of a line inside the block belong to a value (a file that holds a
	// <tool_call> example) until they close, and an end tag in the middle of a line (print("</tool_call>")) is
	// text. Used for the XML forms, whose string values are written bare.
	nest bool
	// quote opens and closes strings; an end tag inside one is text (Gemma's <|"|>).
	quote string
	// jsonEnd: there is no end tag; the block ends where the JSON value after the opener closes ([TOOL_CALLS]).
	jsonEnd bool
}

var (
	syntaxCall    = &blockSyntax{open: tagCallOpen, ends: []string{tagCallClose}, nest: true}
	syntaxFunc    = &blockSyntax{open: tagFuncOpen, ends: []string{tagFuncClose, tagCallClose}, nest: true}
	syntaxInvoke  = &blockSyntax{open: tagFuncCallsOpen, ends: []string{tagFuncCallsClose}}
	syntaxGemma   = &blockSyntax{open: tagGemmaOpen, ends: []string{tagGemmaClose}, quote: gemmaQuote}
	syntaxMistral = &blockSyntax{open: tagMistralOpen, jsonEnd: true}
	// syntaxTools is Qwen2.5-Coder's habit of wrapping its call in the <tools> tag its prompt lists tools in.
	syntaxTools = &blockSyntax{open: tagToolsOpen, ends: []string{tagToolsClose}}
)

// thinkPair is one family's reasoning markers. label is the channel name written right after the opener, which
// is structure, not reasoning (Gemma 4's "thought\n", as vLLM and Ollama strip it).
type thinkPair struct {
	open, close, label string
}

var (
	thinkTagged  = thinkPair{open: tagThinkOpen, close: tagThinkClose}
	thinkGemma   = thinkPair{open: "<|channel>", close: "<channel|>", label: "thought\n"}
	thinkMistral = thinkPair{open: "[THINK]", close: "[/THINK]"}
)

// Turn and end tokens that a server may leave in the text (llama-server prints special tokens when asked to,
// and a model sometimes writes them twice). They are structure and never shown.
var (
	dropsChatML  = []string{"<|im_end|>", "<|endoftext|>"}
	dropsGLM     = []string{"<|observation|>", "<|user|>", "<|endoftext|>"}
	dropsGemma   = []string{tagGemmaClose, "<|tool_response>", "<tool_response|>", "<turn|>"}
	dropsMistral = []string(nil)
)

// dialect is everything the scanner needs for one Format, built once.
type dialect struct {
	blocks []*blockSyntax
	thinks []thinkPair
	drops  []string
	// textSet is what text mode looks for: think openers and closers, </tool_call>, drops and block openers.
	textSet *tagSet
	// thinkSet is what thinking looks for: the closers and the block openers; reasoningSet is the openers only
	// (the reasoning channel has no closer).
	thinkSet, reasoningSet *tagSet
	// blockSets[i][inThink] is what the scanner looks for inside blocks[i]; endSets[i] is its end tags.
	blockSets [][2]*tagSet
	endSets   []*tagSet
}

var dialects [Mistral + 1]*dialect

func init() {
	for f := Auto; f <= Mistral; f++ {
		dialects[f] = buildDialect(f)
	}
}

func buildDialect(f Format) *dialect {
	d := &dialect{thinks: []thinkPair{thinkTagged}}
	switch f {
	case Hermes:
		d.blocks, d.drops = []*blockSyntax{syntaxCall, syntaxTools}, dropsChatML
	case GLM:
		d.blocks, d.drops = []*blockSyntax{syntaxCall}, dropsGLM
	case QwenXML:
		d.blocks, d.drops = []*blockSyntax{syntaxCall, syntaxFunc, syntaxTools}, dropsChatML
	case Gemma4:
		d.blocks, d.drops = []*blockSyntax{syntaxGemma}, dropsGemma
		d.thinks = append(d.thinks, thinkGemma)
	case Mistral:
		d.blocks, d.drops = []*blockSyntax{syntaxMistral}, dropsMistral
		d.thinks = append(d.thinks, thinkMistral)
	default:
		d.blocks = []*blockSyntax{syntaxCall, syntaxFunc, syntaxInvoke, syntaxGemma, syntaxMistral, syntaxTools}
		d.thinks = append(d.thinks, thinkGemma, thinkMistral)
		seen := map[string]bool{}
		for _, ds := range [][]string{dropsChatML, dropsGLM, dropsGemma} {
			for _, t := range ds {
				if !seen[t] {
					seen[t] = true
					d.drops = append(d.drops, t)
				}
			}
		}
	}
	var text, think, opens []string
	for _, t := range d.thinks {
		text = append(text, t.open, t.close)
		think = append(think, t.close)
	}
	text = append(text, tagCallClose)
	for _, t := range d.drops {
		if t != tagCallClose {
			text = append(text, t)
		}
	}
	for _, b := range d.blocks {
		opens = append(opens, b.open)
		d.blockSets = append(d.blockSets, [2]*tagSet{newTagSet(d.tagsIn(b, false)), newTagSet(d.tagsIn(b, true))})
		ends := b.ends
		if len(ends) == 0 {
			ends = []string{b.open} // never searched: a block without end tags is not discarded up to one
		}
		d.endSets = append(d.endSets, newTagSet(ends))
	}
	d.textSet = newTagSet(append(text, opens...))
	d.thinkSet = newTagSet(append(think, opens...))
	d.reasoningSet = newTagSet(opens)
	return d
}

// tagsIn is what the scanner looks for inside block b: its end tags, the call tags that nest, the quote mark,
// and the thinking closers for a block that sits in thinking.
func (d *dialect) tagsIn(b *blockSyntax, inThink bool) []string {
	tags := append([]string(nil), b.ends...)
	if b.nest {
		tags = append(tags, tagCallOpen, tagFuncOpen)
		if b.open == tagCallOpen {
			tags = append(tags, tagFuncClose)
		}
	}
	if b.quote != "" {
		tags = append(tags, b.quote)
	}
	if inThink {
		// A call tag mentioned in thinking prose never closes (lmstudio-bug-tracker#1592); the thinking's closer
		// ends it.
		for _, t := range d.thinks {
			tags = append(tags, t.close)
		}
	}
	return tags
}

// block returns the syntax opened by tag and its index in d.blocks.
func (d *dialect) block(open string) (*blockSyntax, int) {
	for i, b := range d.blocks {
		if b.open == open {
			return b, i
		}
	}
	return d.blocks[0], 0
}

// tagsFor is what the scanner looks for inside the block s is in.
func (d *dialect) tagsFor(s *stream) *tagSet {
	_, i := d.block(s.open)
	if s.inThink && !s.reasoningOnly {
		return d.blockSets[i][1]
	}
	return d.blockSets[i][0]
}

func (d *dialect) thinkOpen(tag string) (thinkPair, bool) {
	for _, t := range d.thinks {
		if t.open == tag {
			return t, true
		}
	}
	return thinkPair{}, false
}

func (d *dialect) isThinkClose(tag string) bool {
	for _, t := range d.thinks {
		if t.close == tag {
			return true
		}
	}
	return false
}

func (d *dialect) isDrop(tag string) bool {
	for _, t := range d.drops {
		if t == tag {
			return true
		}
	}
	return false
}

// opensInThinking reports whether a whole message starts inside thinking: a closer comes before any opener
// (the prompt opened the block: Qwen3.5's "<think>\n", Magistral's forced [THINK]).
func (d *dialect) opensInThinking(text string) bool {
	first := func(tags func(thinkPair) string) int {
		at := -1
		for _, t := range d.thinks {
			if i := strings.Index(text, tags(t)); i >= 0 && (at < 0 || i < at) {
				at = i
			}
		}
		return at
	}
	c := first(func(t thinkPair) string { return t.close })
	if c < 0 {
		return false
	}
	o := first(func(t thinkPair) string { return t.open })
	return o < 0 || o > c
}

func isEnd(b *blockSyntax, tag string) bool {
	for _, e := range b.ends {
		if e == tag {
			return true
		}
	}
	return false
}

// closesHere reports whether an end tag at buf[idx] can close an XML-form block: it stands at the start of a
// line or right after a tag or JSON value (">", "}", "]"). In the middle of a line of text it is part of a value.
func closesHere(buf []byte, idx int) bool {
	j := idx - 1
	for j >= 0 && (buf[j] == ' ' || buf[j] == '\t' || buf[j] == '\r') {
		j--
	}
	return j < 0 || strings.IndexByte("\n>}]", buf[j]) >= 0
}

// bareName reports whether a block body is nothing but a function name: GLM-4.7 writes a call without
// arguments as <tool_call>NAME</tool_call>, inline, so its closer stands right after a letter.
func bareName(body []byte) bool {
	n := 0
	for _, c := range body {
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			if n > 0 {
				// Only trailing space may follow the name.
				n = -1 << 30
			}
		case nameByte(c):
			n++
		default:
			return false
		}
	}
	return n > 0
}

// nameByte says whether c may be part of a function name: what OpenAI allows (letters, digits, _ and -), the
// dots and slashes of MCP names, and any byte of a non-ASCII letter.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' ||
		c == '/' || c >= 0x80
}

// errNotCall marks a block that is no attempt at a call: an elision or a template placeholder where the name
// belongs, or nothing between the tags. It stays text, without an error event.
var errNotCall = errors.New("not a call")

// nameError says why name cannot name a function: errNotCall for a placeholder or an elision ({{ tc.name }},
// <function-name>, "..."), ErrMalformed for anything else that is no name.
func nameError(name string) error {
	if validName(name) {
		return nil
	}
	t := strings.TrimSpace(name)
	word := false
	for i := 0; i < len(t); i++ {
		word = word || nameByte(t[i]) && t[i] != '.' && t[i] != '-' && t[i] != '/'
	}
	if !word || strings.HasPrefix(t, "{") || strings.HasPrefix(t, "<") && strings.HasSuffix(t, ">") && !strings.Contains(t, "\n") {
		return fmt.Errorf("%w: %s is a placeholder, not a function name", errNotCall, clip(name))
	}
	return fmt.Errorf("%w: bad function name %s", ErrMalformed, clip(name))
}

// validName reports whether s can be a function name. Template placeholders ({{ tc.name }}, <function-name>),
// prose and markup cannot, so a block naming one is no call.
func validName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	word := false // "...", "-": punctuation only is an elision in prose (<function=...></function>), no name
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !nameByte(c) && c != ':' {
			return false
		}
		word = word || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
	}
	return word
}
