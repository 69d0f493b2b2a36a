package toolcall

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

const (
	tagThinkOpen      = "<think>"
	tagThinkClose     = "</think>"
	tagCallOpen       = "<tool_call>"
	tagCallClose      = "</tool_call>"
	tagFuncOpen       = "<function="
	tagFuncClose      = "</function>"
	tagFuncCallsOpen  = "<function_calls>"
	tagFuncCallsClose = "</function_calls>"
	tagToolsOpen      = "<tools>"
	tagToolsClose     = "</tools>"
)

type mode int

const (
	modeText    mode = iota // answer text
	modeThink               // inside <think>, or the reasoning channel
	modeBlock               // inside a call block, waiting for its end tag
	modeDiscard             // an oversized block: dropping bytes until its end tag
)

// hold says why text-mode bytes are kept back instead of emitted as content.
type hold int

const (
	holdNone hold = iota
	// holdLead: nothing but whitespace yet; the message may turn out to be a bare JSON call.
	holdLead
	// holdJSON: the message starts with { [ or ```; it is content unless it turns out to be a call.
	holdJSON
	// holdSep: whitespace, ';' or ',' after a call; dropped if another call follows (lemonade#1562).
	holdSep
)

// stream is the state of one channel.
type stream struct {
	reasoningOnly bool
	mode          mode
	buf           []byte
	searched      int    // modeBlock/modeDiscard: bytes of buf already searched for an end tag
	open          string // modeBlock: the tag that opened the block
	inThink       bool   // modeBlock: the block sits inside thinking
	prev          byte   // last byte consumed in text or think mode, for literal-tag checks
	hold          hold
	held          []byte
	callIDs       []string // calls emitted from this stream's text mode, for a late </think>
	js            jsonScan // holdJSON: how far the held text is known to be JSON
	label         string   // modeThink: a channel name still to strip from the start of the reasoning

	// modeBlock, for the structure of the block's body (see blockSyntax).
	depth   int      // nested call tags opened at the start of a line and not yet closed
	inFunc  bool     // inside the block's own <function=…>
	inQuote bool     // between quote marks
	cand    int      // the first end tag that did not close the block, -1 if none: used if nothing better comes
	candTag string   //
	bj      jsonScan // jsonEnd blocks: how far the JSON value after the opener is known
	checked bool     // a block whose body must be JSON ([tools]) has shown its first byte
}

// enterBlock starts a block opened by tag.
func (s *stream) enterBlock(tag string, inThink bool) {
	s.mode, s.open, s.inThink, s.searched = modeBlock, tag, inThink, 0
	s.depth, s.inFunc, s.inQuote, s.cand, s.candTag, s.bj = 0, tag == tagFuncOpen, false, -1, "", jsonScan{}
	s.checked = false
}

func (s *stream) consume(n int) {
	// Shift when what stays is no longer than what goes (so the copy is paid for by the consumed bytes and the
	// backing array is reused); otherwise reslice, so that many tags in one large chunk stay linear. Either way
	// memory stays bounded by what is pending.
	if rest := len(s.buf) - n; rest <= n || rest <= 4096 {
		m := copy(s.buf, s.buf[n:])
		s.buf = s.buf[:m]
		return
	}
	s.buf = s.buf[n:]
}

func (p *Parser) run(s *stream, final bool) {
	for {
		var more bool
		switch s.mode {
		case modeText:
			more = p.stepText(s, final)
		case modeThink:
			more = p.stepThink(s, final)
		case modeBlock:
			more = p.stepBlock(s, final)
		case modeDiscard:
			more = p.stepDiscard(s, final)
		}
		if !more {
			return
		}
	}
}

// tagSet is a list of tags the scanner looks for, with what it needs to skip most bytes fast.
type tagSet struct {
	tags   []string
	firsts string    // the tags' first bytes: "<", maybe "["
	second [256]bool // the tags' second bytes: "a < b" and "<b>" are passed over without comparing every tag
}

func newTagSet(tags []string) *tagSet {
	ts := &tagSet{tags: tags, firsts: "<"}
	for _, t := range tags {
		switch t[0] {
		case '[':
			ts.firsts = "<["
		case '<':
		default:
			panic("toolcall: a tag must start with < or [: " + t) // the scanner searches for those two bytes only
		}
		ts.second[t[1]] = true
	}
	return ts
}

// scanTags finds the earliest full tag of ts in buf (from offset from), or a tag prefix that runs to the end of
// buf.
func scanTags(buf []byte, from int, ts *tagSet) (idx int, tag string, partial bool) {
	tags, firsts := ts.tags, ts.firsts
	// Two byte searches beat bytes.IndexAny; where the next '<' is stays known across candidates, so that a run of
	// '[' far from any '<' is not searched again for each one.
	nextLT := -2
	for i := from; i < len(buf); {
		if nextLT < i && nextLT != -1 && (len(firsts) < 2 || len(buf)-i > 32) {
			nextLT = bytes.IndexByte(buf[i:], '<')
			if nextLT >= 0 {
				nextLT += i
			}
		}
		j := nextLT
		if len(firsts) > 1 && len(buf)-i <= 32 {
			// Streamed chunks are a few bytes: a plain loop beats two searches there.
			j = -1
			for k := i; k < len(buf); k++ {
				if c := buf[k]; c == '<' || c == firsts[1] {
					j = k
					break
				}
			}
		} else if len(firsts) > 1 {
			lim := len(buf)
			if j >= 0 {
				lim = j
			}
			if k := bytes.IndexByte(buf[i:lim], firsts[1]); k >= 0 {
				j = i + k
			}
		}
		if j < 0 {
			return -1, "", false
		}
		i = j
		rest := buf[i:]
		if len(rest) > 1 && !ts.second[rest[1]] {
			i++
			continue
		}
		for _, t := range tags {
			if len(rest) >= len(t) {
				if string(rest[:len(t)]) == t {
					return i, t, false
				}
			} else if string(rest) == t[:len(rest)] {
				return i, "", true
			}
		}
		i++
	}
	return -1, "", false
}

// literalTag reports whether a think tag at buf[idx:end] is quoted (`</think>`, "</think>"): models that discuss
// the tag inside their thinking write it that way (llama.cpp#27661). wait means one more byte is needed to decide.
func (s *stream) literalTag(idx, end int, final bool) (literal, wait bool) {
	if end == len(s.buf) && !final {
		return false, true
	}
	before := s.prev
	if idx > 0 {
		before = s.buf[idx-1]
	}
	if before != '`' && before != '"' && before != '\'' {
		return false, false
	}
	return end < len(s.buf) && s.buf[end] == before, false
}

func (p *Parser) stepText(s *stream, final bool) bool {
	idx, tag, partial := scanTags(s.buf, 0, p.d.textSet)
	if idx < 0 || (partial && final) {
		p.text(s, s.buf)
		s.buf = s.buf[:0]
		return false
	}
	if partial {
		p.text(s, s.buf[:idx])
		s.consume(idx)
		return false
	}
	end := idx + len(tag)
	pair, opens := p.d.thinkOpen(tag)
	closes := !opens && p.d.isThinkClose(tag)
	if opens || closes {
		literal, wait := s.literalTag(idx, end, final)
		if wait {
			p.text(s, s.buf[:idx])
			s.consume(idx)
			return false
		}
		if literal {
			p.text(s, s.buf[:end])
			s.consume(end)
			return true
		}
	}
	p.text(s, s.buf[:idx])
	s.consume(end)
	s.prev = '>'
	switch {
	case opens:
		p.releaseHeld(s)
		s.mode, s.label = modeThink, pair.label
	case closes:
		// Stray: the thinking was never opened in this stream, so the generation began inside it (the prompt
		// opened <think>). Content already emitted cannot be taken back, and neither can calls: say which calls
		// came from thinking so the agent drops them. Parse and StartInThinking avoid this.
		p.releaseHeld(s)
		if len(s.callIDs) > 0 {
			p.settle()
			p.out = append(p.out, Event{
				Kind: KindError,
				Text: tag,
				Err: fmt.Errorf("%w: %s without its opener: calls %s came before it and were written while thinking; do not run them",
					ErrLateThinkClose, tag, strings.Join(s.callIDs, ", ")),
			})
			s.callIDs = nil
		}
	case tag == tagCallClose:
		// Stray </tool_call> (llama.cpp#20761) — or the end of a call whose opening tag is missing
		// (hermes-agent#742): a held bare JSON message is then read as that call.
		if s.hold == holdJSON {
			raw := string(s.held)
			s.held, s.hold = s.held[:0], holdSep
			calls, err := parseJSONCalls(raw, false)
			p.emitCalls(calls, err, raw+tagCallClose, false)
		}
	case p.d.isDrop(tag):
		// A turn or end token: structure, consumed. Whatever was held stays held.
	default:
		// JSON before a real call tag is not "the whole message": it is content. Separators before it are dropped.
		p.releaseHeld(s)
		s.held, s.hold = s.held[:0], holdNone
		s.enterBlock(tag, false)
	}
	return true
}

// text routes text-mode bytes to content, or keeps them back while the hold state says so.
func (p *Parser) text(s *stream, b []byte) {
	if len(b) == 0 {
		return
	}
	s.prev = b[len(b)-1]
	for len(b) > 0 {
		switch s.hold {
		case holdNone:
			p.emitBytes(KindContent, b)
			return
		case holdLead, holdSep:
			i := 0
			for i < len(b) && isSep(b[i], s.hold == holdSep) {
				i++
			}
			s.held = append(s.held, b[:i]...)
			b = b[i:]
			if len(b) == 0 {
				return
			}
			if s.hold == holdLead && (b[0] == '{' || b[0] == '[' || b[0] == '`') {
				s.hold, s.js = holdJSON, jsonScan{}
				continue
			}
			// Whitespace before prose is part of it.
			p.emitBytes(KindContent, s.held)
			s.held, s.hold = s.held[:0], holdNone
		case holdJSON:
			if len(s.held)+len(b) > p.maxPending() {
				p.emitBytes(KindContent, s.held)
				p.emitBytes(KindContent, b)
				s.held, s.hold = s.held[:0], holdNone
				return
			}
			s.held = append(s.held, b...)
			if notJSONMessage(s) {
				// "[1] First point", "`code` is…": prose after all. Stream it instead of holding it to the end.
				p.emitBytes(KindContent, s.held)
				s.held, s.hold = s.held[:0], holdNone
			}
			return
		}
	}
}

// jsonScan follows held text incrementally (so byte-at-a-time feeding stays linear) to see whether it is still
// nothing but JSON values.
type jsonScan struct {
	pos   int
	depth int
	str   bool
	esc   bool
	done  bool // a top-level value has closed
}

// notJSONMessage reports whether the held text can no longer be a message made only of JSON calls: a complete
// value followed by other text, or a backtick that does not open a code fence.
func notJSONMessage(s *stream) bool {
	h, j := s.held, &s.js
	if h[0] == '`' {
		return len(h) >= 3 && string(h[:3]) != "```"
	}
	for ; j.pos < len(h); j.pos++ {
		c := h[j.pos]
		if j.done {
			switch c {
			case ' ', '\t', '\r', '\n', ';', ',':
				continue
			case '{', '[':
				j.done, j.depth = false, 0 // another value: several calls in a row
			default:
				return true
			}
		}
		closing := !j.esc && !j.str && (c == '}' || c == ']')
		j.step(c)
		j.done = closing && j.depth <= 0
	}
	return false
}

// step follows one byte of JSON: strings with their escapes, and the nesting depth outside them.
func (j *jsonScan) step(c byte) {
	switch {
	case j.esc:
		j.esc = false
	case j.str:
		j.esc = c == '\\'
		j.str = c != '"'
	case c == '"':
		j.str = true
	case c == '{' || c == '[':
		j.depth++
	case c == '}' || c == ']':
		j.depth--
	}
}

func isSep(c byte, afterCall bool) bool {
	switch c {
	case ' ', '\t', '\r', '\n':
		return true
	case ';', ',':
		return afterCall
	}
	return false
}

// releaseHeld emits held text as content before a think tag.
func (p *Parser) releaseHeld(s *stream) {
	if s.hold == holdJSON {
		p.emitBytes(KindContent, s.held)
		s.held, s.hold = s.held[:0], holdNone
	}
}

// closeHold decides what held text was once the message is over.
func (p *Parser) closeHold(s *stream) {
	if s.hold == holdJSON {
		raw := string(s.held)
		if p.format == Auto {
			// Only a message that is nothing but a call counts (hermes-agent#107125); anything else stays content.
			if calls, err := parseJSONCalls(raw, true); err == nil && len(calls) > 0 && p.allOffered(calls) {
				p.emitCalls(calls, nil, raw, false)
				s.held, s.hold = s.held[:0], holdNone
				return
			}
		}
		p.emit(KindContent, raw)
	}
	s.held, s.hold = s.held[:0], holdLead
}

// allOffered reports whether every call names an offered tool; with no tools given, any name counts. A bare
// JSON message that names something else ({"name": "Ada", "arguments": …}) is more likely an answer than a call.
func (p *Parser) allOffered(calls []Call) bool {
	if p.tools == nil {
		return true
	}
	for _, c := range calls {
		if _, ok := p.tools.tools[c.Name]; !ok {
			return false
		}
	}
	return true
}

func (p *Parser) stepThink(s *stream, final bool) bool {
	if s.label != "" {
		n := min(len(s.buf), len(s.label))
		switch {
		case string(s.buf[:n]) != s.label[:n]:
			s.label = ""
		case n == len(s.label):
			s.consume(n)
			s.label = ""
		case !final:
			return false // "thou": wait to see whether it is the label
		default:
			s.label = ""
		}
	}
	tags := p.d.thinkSet
	if s.reasoningOnly {
		tags = p.d.reasoningSet
	}
	idx, tag, partial := scanTags(s.buf, 0, tags)
	if idx < 0 || (partial && final) {
		p.think(s, s.buf)
		s.buf = s.buf[:0]
		return false
	}
	if partial {
		p.think(s, s.buf[:idx])
		s.consume(idx)
		return false
	}
	end := idx + len(tag)
	if p.d.isThinkClose(tag) {
		literal, wait := s.literalTag(idx, end, final)
		if wait {
			p.think(s, s.buf[:idx])
			s.consume(idx)
			return false
		}
		if literal {
			p.think(s, s.buf[:end])
			s.consume(end)
			return true
		}
		p.think(s, s.buf[:idx])
		s.consume(end)
		s.prev = '>'
		s.mode = modeText
		return true
	}
	p.think(s, s.buf[:idx])
	s.consume(end)
	s.prev = '>'
	s.enterBlock(tag, true)
	return true
}

func (p *Parser) think(s *stream, b []byte) {
	if len(b) > 0 {
		s.prev = b[len(b)-1]
		p.emitBytes(KindReasoning, b)
	}
}

func (p *Parser) stepBlock(s *stream, final bool) bool {
	syn, _ := p.d.block(s.open)
	if syn.jsonEnd {
		return p.stepJSONBlock(s, final)
	}
	if syn == syntaxTools && !s.checked {
		// <tools> is a call only when JSON follows; in prose ("the <tools> tag") it is text.
		i := 0
		for i < len(s.buf) && strings.IndexByte(" \t\r\n", s.buf[i]) >= 0 {
			i++
		}
		switch {
		case i == len(s.buf) && !final && i <= p.maxPending():
			return false
		case i == len(s.buf) || (s.buf[i] != '{' && s.buf[i] != '['):
			s.mode, s.hold = modeText, holdNone
			p.text(s, []byte(s.open))
			return true
		}
		s.checked = true
	}
	tags := p.d.tagsFor(s)
	for {
		idx, tag, partial := scanTags(s.buf, s.searched, tags)
		// The cap applies to where the end tag starts, not to how the bytes were chunked, so that feeding byte by
		// byte and feeding everything at once give the same events.
		start := idx
		if idx < 0 {
			start = len(s.buf)
		}
		if start > p.maxPending() {
			p.overflow(s)
			return true
		}
		if idx < 0 || partial {
			s.searched = start
			if !final {
				return false
			}
			if s.cand >= 0 {
				// No end tag closed the block by its structure; the first one did close it after all.
				n, tag := s.cand, s.candTag
				p.endBlock(s, tag, n, true)
				s.consume(n + len(tag))
				return true
			}
			p.endBlock(s, "", len(s.buf), false)
			s.buf = s.buf[:0]
			return false
		}
		s.searched = idx + len(tag)
		switch {
		case s.inThink && p.d.isThinkClose(tag):
			p.think(s, append([]byte(s.open), s.buf[:idx]...))
			s.consume(idx)
			s.mode = modeThink
			return true
		case tag == syn.quote:
			s.inQuote = !s.inQuote
			continue
		case s.inQuote:
		case tag == tagCallOpen || tag == tagFuncOpen:
			switch {
			case !atLineStart(s.buf, 0, idx):
			case tag == tagFuncOpen && !s.inFunc && s.depth == 0:
				s.inFunc = true
			case s.inFunc:
				// Inside a function's values: a call example in a file, until it closes.
				s.depth++
			case tag == tagCallOpen && s.cand >= 0:
				// A new call on its own line after an end tag that did not look like one: that tag was the end.
				n, tag := s.cand, s.candTag
				p.endBlock(s, tag, n, true)
				s.consume(n + len(tag))
				return true
			}
			continue
		case s.depth > 0:
			if tag == tagFuncClose || tag == tagCallClose {
				s.depth--
			}
		case tag == tagFuncClose && !isEnd(syn, tag):
			s.inFunc = false
			continue
		case !syn.nest || closesHere(s.buf, idx) || tag == tagCallClose && s.open == tagCallOpen && bareName(s.buf[:idx]):
			p.endBlock(s, tag, idx, true)
			s.consume(idx + len(tag))
			return true
		}
		if isEnd(syn, tag) && s.cand < 0 {
			s.cand, s.candTag = idx, tag
		}
	}
}

// stepJSONBlock follows a block without an end tag ([TOOL_CALLS]): a function name and markers, then one JSON
// value; the block ends where that value closes.
func (p *Parser) stepJSONBlock(s *stream, final bool) bool {
	j := &s.bj
	b := s.buf
	for j.pos < len(b) {
		if j.pos > p.maxPending() {
			p.overflow(s)
			return true
		}
		c := b[j.pos]
		if !j.done && j.depth == 0 {
			if (c == '<' || c == '[') && s.inThink && !s.reasoningOnly {
				// Thinking that mentioned [TOOL_CALLS] goes on until its closer, as for the tagged blocks.
				for _, t := range p.d.thinks {
					rest := string(b[j.pos:min(len(b), j.pos+len(t.close))])
					switch {
					case rest == t.close:
						p.think(s, append([]byte(s.open), b[:j.pos]...))
						s.consume(j.pos)
						s.mode = modeThink
						return true
					case !final && strings.HasPrefix(t.close, rest):
						return false
					}
				}
			}
			// Before the value: skip the name and the [ARGS] / [CALL_ID] markers.
			if c == '[' {
				rest := string(b[j.pos:min(len(b), j.pos+len(mistralCallID))])
				switch {
				case strings.HasPrefix(rest, mistralArgs):
					j.pos += len(mistralArgs)
					continue
				case strings.HasPrefix(rest, mistralCallID):
					j.pos += len(mistralCallID)
					continue
				case !final && (strings.HasPrefix(mistralArgs, rest) || strings.HasPrefix(mistralCallID, rest)):
					return false
				}
			}
			if c == '{' || c == '[' {
				j.depth = 1
				j.pos++
				continue
			}
			if c == '\n' && strings.TrimSpace(string(b[:j.pos])) != "" || j.pos > 256 {
				// No JSON value where one belongs: the body ends here and is reported as malformed.
				p.endBlock(s, "", j.pos, true)
				s.consume(j.pos)
				return true
			}
			j.pos++
			continue
		}
		closing := !j.esc && !j.str && (c == '}' || c == ']')
		j.step(c)
		if closing && j.depth == 0 {
			n := j.pos + 1
			p.endBlock(s, "", n, true)
			s.consume(n)
			return true
		}
		j.pos++
	}
	if final {
		p.endBlock(s, "", len(s.buf), false)
		s.buf = s.buf[:0]
	}
	return false
}

// endBlock handles a block whose body is s.buf[:n], ended by tag ("" for none). closed is false when the stream
// ended first.
func (p *Parser) endBlock(s *stream, tag string, n int, closed bool) {
	body := string(s.buf[:n])
	raw := s.open + body + tag
	if s.inThink {
		s.prev = '>'
		p.emit(KindReasoning, raw)
		s.mode = modeThink
		if closed {
			if calls, err := p.parseBlock(s.open, body, tag, closed); err == nil {
				p.emitCalls(calls, nil, raw, true)
			}
		}
		return
	}
	s.mode, s.hold, s.prev = modeText, holdSep, '>'
	calls, err := p.parseBlock(s.open, body, tag, closed)
	if !closed && err == nil && s.open == tagFuncCallsOpen {
		err = fmt.Errorf("%w: missing %s", ErrUnclosed, tagFuncCallsClose)
	}
	if !closed && err != nil && !errors.Is(err, ErrUnclosed) {
		err = fmt.Errorf("%w: stream ended inside %s: %w", ErrUnclosed, s.open, err)
	}
	if closed && err != nil && len(calls) == 0 && !errors.Is(err, ErrUnclosed) {
		// A closed block that holds no call stays in the text as the model wrote it (as vLLM and llama.cpp
		// keep it), and the error says why it was not run, unless the block was no attempt at a call.
		p.emitBytes(KindContent, []byte(raw))
		s.hold = holdNone
		if errors.Is(err, errNotCall) {
			return
		}
		p.settle()
		p.out = append(p.out, Event{Kind: KindError, Text: raw, Err: fmt.Errorf("%w in %s", err, clip(raw)), Shown: true})
		return
	}
	p.emitCalls(calls, err, raw, false)
}

// overflow drops an unclosed block's first MaxPending bytes: as reasoning when it sits in thinking (prose that
// mentioned a tag), else as an error; the rest of the block is then discarded up to its end tag.
func (p *Parser) overflow(s *stream) {
	max := p.maxPending()
	if s.inThink {
		p.think(s, append([]byte(s.open), s.buf[:max]...))
		s.consume(max)
		s.mode = modeThink
		return
	}
	p.settle()
	p.out = append(p.out, Event{
		Kind: KindError,
		Text: s.open + string(s.buf[:max]),
		Err:  fmt.Errorf("%w: more than %d bytes after %s without its end tag", ErrTooLarge, max, s.open),
	})
	s.consume(max)
	s.searched = 0
	s.mode = modeDiscard
}

func longestTag(tags []string) string {
	var l string
	for _, t := range tags {
		if len(t) > len(l) {
			l = t
		}
	}
	return l
}

func (p *Parser) stepDiscard(s *stream, final bool) bool {
	syn, i := p.d.block(s.open)
	tags := syn.ends
	if len(tags) == 0 {
		// No end tag to wait for: the rest of the message is the oversized call.
		s.buf = s.buf[:0]
		if final {
			s.mode = modeText
		}
		return false
	}
	idx, tag, partial := scanTags(s.buf, 0, p.d.endSets[i])
	if idx >= 0 && !partial {
		s.consume(idx + len(tag))
		s.mode, s.hold = modeText, holdSep
		return true
	}
	if final {
		s.buf = s.buf[:0]
		s.mode = modeText
		return false
	}
	keep := len(longestTag(tags)) - 1
	if idx >= 0 {
		keep = len(s.buf) - idx
	}
	if len(s.buf) > keep {
		s.consume(len(s.buf) - keep)
	}
	return false
}

func (p *Parser) emit(k Kind, text string) {
	if text == "" {
		return
	}
	p.pendFor(k)
	p.pend = append(p.pend, text...)
}

// emitBytes is emit for bytes that are still in a buffer: they are copied once, into the gathered text.
func (p *Parser) emitBytes(k Kind, b []byte) {
	if len(b) == 0 {
		return
	}
	p.pendFor(k)
	p.pend = append(p.pend, b...)
}

// pendFor readies p.pend for text of kind k. Text of the same kind as the last merges with it, so that
// byte-at-a-time feeding does not produce a flood of events; it is gathered in one buffer so that many pieces
// stay linear.
func (p *Parser) pendFor(k Kind) {
	if len(p.pend) > 0 && p.pendKind != k {
		p.settle()
	}
	p.pendKind = k
}

// settle turns gathered text into its event; everything that appends to p.out directly calls it first.
func (p *Parser) settle() {
	if len(p.pend) > 0 {
		p.out = append(p.out, Event{Kind: p.pendKind, Text: string(p.pend)})
		p.pend = p.pend[:0]
	}
}

func (p *Parser) emitCalls(calls []Call, err error, raw string, inThink bool) {
	p.settle()
	kind := KindCall
	if inThink {
		kind = KindReasoningCall
	}
	for i := range calls {
		c := calls[i]
		p.nextID++
		c.ID = "call_" + strconv.Itoa(p.nextID)
		if c.Raw == "" {
			c.Raw = raw
		}
		p.out = append(p.out, Event{Kind: kind, Call: &c})
		if !inThink {
			p.content.callIDs = append(p.content.callIDs, c.ID)
		}
	}
	if err != nil {
		p.out = append(p.out, Event{Kind: KindError, Text: raw, Err: fmt.Errorf("%w in %s", err, clip(raw))})
	}
}

// clip quotes at most 200 bytes of s for an error message; the full text travels in Event.Text.
func clip(s string) string {
	const max = 200
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
