package toolcall

import "strings"

// blockSyntax is one kind of call block, as the shared scanner sees it: the tag that opens it and how its end
// is found. What the body means is parseBlock's business.
type blockSyntax struct {
	tags [2][]string // blockTags for a block outside thinking and inside it, built once
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
)

// dialectOf lists the blocks each Format reads. A <tool_call> body may be Hermes JSON, Qwen XML, GLM's
// arg_key/arg_value pairs or Anthropic-style invokes; the body tells which, so every dialect that uses the tag
// reads them all.
func dialectOf(f Format) []*blockSyntax {
	switch f {
	case Hermes, GLM:
		return []*blockSyntax{syntaxCall}
	case QwenXML:
		return []*blockSyntax{syntaxCall, syntaxFunc}
	case Gemma4:
		return []*blockSyntax{syntaxGemma}
	case Mistral:
		return []*blockSyntax{syntaxMistral}
	}
	return []*blockSyntax{syntaxCall, syntaxFunc, syntaxInvoke, syntaxGemma, syntaxMistral}
}

func (p *Parser) syntax(open string) *blockSyntax {
	for _, b := range p.dialect {
		if b.open == open {
			return b
		}
	}
	return syntaxCall
}

func init() {
	for _, b := range []*blockSyntax{syntaxCall, syntaxFunc, syntaxInvoke, syntaxGemma, syntaxMistral} {
		b.tags[0] = blockTags(b, false, false)
		b.tags[1] = blockTags(b, true, false)
	}
}

// tagsFor returns blockTags(b, inThink, reasoningOnly) without building it on every step.
func (b *blockSyntax) tagsFor(inThink, reasoningOnly bool) []string {
	if inThink && !reasoningOnly {
		return b.tags[1]
	}
	return b.tags[0]
}

// blockTags is what the scanner looks for inside a block: its end tags, the call tags that nest, the quote
// mark, and </think> for a block that sits in thinking.
func blockTags(b *blockSyntax, inThink, reasoningOnly bool) []string {
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
	if inThink && !reasoningOnly {
		// A call tag mentioned in thinking prose never closes (lmstudio-bug-tracker#1592); </think> ends it.
		tags = append(tags, tagThinkClose)
	}
	return tags
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
