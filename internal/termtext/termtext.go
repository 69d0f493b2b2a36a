// Package termtext makes untrusted text safe to write to a terminal: a model's answer, a tool's or MCP server's
// result, a stored title, an error that quotes any of them. Terminals act on what they print: an escape
// sequence can set the window title, write the clipboard (OSC 52), clear the screen or move the cursor back over
// lines the user reviews; a carriage return or backspace overwrites what came before; bidi controls reorder what is
// shown (file‮gnp.exe reads as fileexe.png). termtext shows all of those as visible text instead:
//
//   - C0 controls and DEL in caret notation (ESC is ^[, BEL ^G, backspace ^H, DEL ^?), so an escape sequence is
//     printed as its characters (^[]52;c;… or ^[[2J) and does nothing;
//   - a carriage return as \r, except right before a newline, where it hides nothing and is dropped;
//   - C1 controls (U+0080–U+009F, such as the 8-bit CSI U+009B) and the bidi controls (U+061C, U+200E, U+200F,
//     U+202A–U+202E, U+2066–U+2069) as <U+XXXX>, and bytes that are not UTF-8 as \xNN;
//   - an OSC 8 hyperlink as its text followed by its real target in angle brackets: "docs <https://evil.example>".
//
// Newlines and tabs are kept. The Writer does the same to a stream and is safe when a sequence or a character
// is split across writes. termtext does not make text safe for HTML or a shell; it only decides what a terminal
// will do with it.
package termtext

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"
)

// Clean returns s as it may be written to a terminal.
func Clean(s string) string {
	var c cleaner
	var out bytes.Buffer
	out.Grow(len(s))
	c.feed(&out, []byte(s), true)
	return out.String()
}

// Writer cleans what is written to it before passing it on. A sequence or character split across writes is
// held until the rest arrives (a held OSC 8 link opener at most maxLinkOpener bytes); Flush ends the text,
// writing what is held as it stands.
type Writer struct {
	w   io.Writer
	c   cleaner
	out bytes.Buffer
}

// NewWriter returns a Writer that writes cleaned text to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write cleans p and writes the result; it reports len(p) when the underlying write succeeds, held bytes
// included.
func (w *Writer) Write(p []byte) (int, error) {
	w.out.Reset()
	w.c.feed(&w.out, p, false)
	if w.out.Len() > 0 {
		if _, err := w.w.Write(w.out.Bytes()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (w *Writer) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush writes what is held: an unfinished sequence or character escaped, and the target of a link whose closing
// never came. The Writer may be used again after it.
func (w *Writer) Flush() error {
	w.out.Reset()
	w.c.feed(&w.out, nil, true)
	if w.out.Len() == 0 {
		return nil
	}
	_, err := w.w.Write(w.out.Bytes())
	return err
}

// maxLinkOpener bounds an OSC 8 sequence (parameters and target) held while waiting for its terminator; a longer
// one is shown escaped.
const maxLinkOpener = 4096

// cleaner is the state carried between pieces of a stream: bytes that may begin a sequence or character not yet
// complete, and the target of the open link.
type cleaner struct {
	held   []byte
	link   string
	inLink bool
}

// feed cleans p (after what is held) into out; final says no more text follows, so nothing may be held.
func (c *cleaner) feed(out *bytes.Buffer, p []byte, final bool) {
	buf := p
	if len(c.held) > 0 {
		buf = append(c.held, p...)
		c.held = nil
	}
	for i := 0; i < len(buf); {
		b := buf[i]
		switch {
		case b == '\n' || b == '\t' || (b >= 0x20 && b < 0x7f):
			j := i + 1
			for j < len(buf) && (buf[j] == '\n' || buf[j] == '\t' || (buf[j] >= 0x20 && buf[j] < 0x7f)) {
				j++
			}
			out.Write(buf[i:j])
			i = j
		case b == 0x1b:
			n, complete := c.link8(out, buf[i:], final)
			if !complete {
				c.held = append([]byte(nil), buf[i:]...)
				return
			}
			if n == 0 {
				out.WriteString("^[")
				n = 1
			}
			i += n
		case b == '\r':
			if i+1 == len(buf) && !final {
				c.held = []byte{'\r'}
				return
			}
			if i+1 < len(buf) && buf[i+1] == '\n' {
				i++ // CR LF: the newline alone shows the same and hides nothing
				continue
			}
			out.WriteString(`\r`)
			i++
		case b < 0x20:
			out.WriteByte('^')
			out.WriteByte(b + 0x40)
			i++
		case b == 0x7f:
			out.WriteString("^?")
			i++
		default:
			r, size := utf8.DecodeRune(buf[i:])
			if r == utf8.RuneError && size <= 1 {
				if !final && !utf8.FullRune(buf[i:]) {
					c.held = append([]byte(nil), buf[i:]...)
					return
				}
				fmt.Fprintf(out, `\x%02x`, b)
				i++
				continue
			}
			if hidden(r) {
				fmt.Fprintf(out, "<U+%04X>", r)
			} else {
				out.Write(buf[i : i+size])
			}
			i += size
		}
	}
	if final && c.inLink {
		c.closeLink(out)
	}
}

// hidden reports the runes a terminal acts on rather than shows: C1 controls and bidi controls.
func hidden(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// link8 reads an OSC 8 hyperlink sequence at the start of b (which begins with ESC): it returns the bytes it
// took (0: not a link sequence, show the ESC escaped) and whether b held enough to decide (false: wait for more,
// which only happens when not final). An opener remembers its target, shown when the link closes; a closer writes
// it.
func (c *cleaner) link8(out *bytes.Buffer, b []byte, final bool) (n int, complete bool) {
	const intro = "\x1b]8;"
	if len(b) < len(intro) {
		if !final && bytes.HasPrefix([]byte(intro), b) {
			return 0, false
		}
		return 0, true
	}
	if !bytes.HasPrefix(b, []byte(intro)) {
		return 0, true
	}
	end, term := -1, 0
	for j := len(intro); j < len(b) && j <= maxLinkOpener; j++ {
		if b[j] == 0x07 {
			end, term = j, 1
			break
		}
		if b[j] == 0x1b {
			if j+1 == len(b) {
				if final {
					return 0, true
				}
				return 0, false
			}
			if b[j+1] != '\\' {
				return 0, true // a sequence cut by another escape is no link: show it all
			}
			end, term = j, 2
			break
		}
		if b[j] < 0x20 || b[j] == 0x7f {
			return 0, true
		}
	}
	if end < 0 {
		if !final && len(b) <= maxLinkOpener {
			return 0, false
		}
		return 0, true
	}
	body := b[len(intro):end]
	semi := bytes.IndexByte(body, ';')
	if semi < 0 {
		return 0, true
	}
	target := string(body[semi+1:])
	if c.inLink {
		c.closeLink(out)
	}
	if target != "" {
		c.link, c.inLink = target, true
	}
	return end + term, true
}

// closeLink shows the open link's target after its text.
func (c *cleaner) closeLink(out *bytes.Buffer) {
	var t cleaner
	out.WriteString(" <")
	t.feed(out, []byte(c.link), true)
	out.WriteString(">")
	c.link, c.inLink = "", false
}
