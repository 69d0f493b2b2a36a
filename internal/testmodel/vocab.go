package testmodel

import (
	"fmt"
	"strings"

	"github.com/visorhq/visor/engine/gguf"
)

// Token ids of the chat model. Ids 0–255 are the 256 byte tokens, id b standing for byte b, so the id of an ASCII
// character is its code; the special tokens follow.
const (
	TokenEndOfText   = 256 // <|endoftext|>, control; also BOS and padding (add_bos_token is false)
	TokenIMStart     = 257 // <|im_start|>, control
	TokenIMEnd       = 258 // <|im_end|>, control; EOS
	TokenToolCall    = 259 // <tool_call>, user-defined
	TokenToolCallEnd = 260 // </tool_call>, user-defined
	// TokenToolResponse and TokenToolResponseEnd wrap tool results in the prompt. They are single tokens so that
	// attention can find a result in the context (see the package doc); the model never writes them.
	TokenToolResponse    = 261 // <tool_response>, user-defined
	TokenToolResponseEnd = 262 // </tool_response>, user-defined
	// TokenCallBody is CallBody as one user-defined token: a model that picks its next token from the last one
	// alone cannot spell that JSON byte by byte (its repeated characters need different successors), so without
	// a grammar (raw mode) this token is how the model writes a whole, valid call.
	TokenCallBody = 263

	// VocabSize is the number of tokens of the chat model.
	VocabSize = 264
)

// CallBody is the text of TokenCallBody: the body of a Hermes call of list_dir on ".", exactly as the model
// spells that call byte by byte under llama-server's tool-call grammar (compact JSON, name first). The grammar
// accepts it wherever that call is valid (its space rule allows none as well as Python's ", " and ": "), so in
// native mode it lets the token through for a list_dir whose schema takes {"path":"."} and masks it for every
// other tool or schema, which then take the byte route. Compact, the server's arguments stay byte for byte
// what they were before the token existed ({"path":"."}; with Python's spacing the server would pass the
// spaces on), and the text never occurs in prompts the templates render (they write "name": with a space), so
// only the model's own replayed calls tokenize to it.
const CallBody = `{"name":"list_dir","arguments":{"path":"."}}`

// llama.cpp token types (enum llama_token_type).
const (
	tokenTypeNormal      int32 = 1
	tokenTypeControl     int32 = 3
	tokenTypeUserDefined int32 = 4
)

// byteTokenText returns the text of the byte token for b under GPT-2's byte-to-unicode mapping, which
// llama.cpp's BPE tokenizer uses to find the token of a byte: printable Latin-1 bytes map to themselves, the
// others (controls, space, 0x7F–0xA0, 0xAD) to U+0100 onwards in byte order. A newline is therefore "Ċ".
func byteTokenText(b byte) string {
	if printableByte(b) {
		return string(rune(b))
	}
	n := 0
	for c := 0; c < int(b); c++ {
		if !printableByte(byte(c)) {
			n++
		}
	}
	return string(rune(256 + n))
}

func printableByte(b byte) bool {
	return ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b)
}

// specialTokens are the chat model's tokens beyond the 256 bytes.
var specialTokens = []struct {
	id   int
	text string
	typ  int32
}{
	{TokenEndOfText, "<|endoftext|>", tokenTypeControl},
	{TokenIMStart, "<|im_start|>", tokenTypeControl},
	{TokenIMEnd, "<|im_end|>", tokenTypeControl},
	{TokenToolCall, "<tool_call>", tokenTypeUserDefined},
	{TokenToolCallEnd, "</tool_call>", tokenTypeUserDefined},
	{TokenToolResponse, "<tool_response>", tokenTypeUserDefined},
	{TokenToolResponseEnd, "</tool_response>", tokenTypeUserDefined},
	// User-defined tokens are matched in raw text, before any byte splitting, and their piece is their text
	// as is (no byte-to-unicode mapping), so the spaces and quotes need no escaping.
	{TokenCallBody, CallBody, tokenTypeUserDefined},
}

// TokenCount is how many tokens the chat models of this package (and the stand-ins built on their tokenizer)
// make of text: one per special token, one per other byte. Tests use it for a request's new text.
func TokenCount(text string) int {
	n := 0
	for _, sp := range specialTokens {
		n += strings.Count(text, sp.text)
		text = strings.ReplaceAll(text, sp.text, "")
	}
	return n + len(text)
}

// vocabulary returns the token texts and llama.cpp token types of the chat model, indexed by token id.
func vocabulary() (texts []string, types []int32) {
	texts = make([]string, VocabSize)
	types = make([]int32, VocabSize)
	for b := 0; b < 256; b++ {
		texts[b] = byteTokenText(byte(b))
		types[b] = tokenTypeNormal
	}
	for _, s := range specialTokens {
		texts[s.id] = s.text
		types[s.id] = s.typ
	}
	return texts, types
}

// TokenizerKV returns the chat model's tokenizer and chat template metadata with the vocabulary padded to n
// tokens (n ≥ VocabSize), for a full-size stand-in model whose embedding table has n rows: prompts then tokenize
// one token per byte with the ChatML special tokens, and the template renders tools and images like the tiny
// model's. The filler tokens are never produced by tokenizing (there are no merges).
func TokenizerKV(n int) ([]gguf.KV, error) {
	if n < VocabSize {
		return nil, fmt.Errorf("testmodel: a vocabulary of %d tokens cannot hold the chat model's %d", n, VocabSize)
	}
	w, err := newChatWiring()
	if err != nil {
		return nil, err
	}
	for i := VocabSize; i < n; i++ {
		w.tokens = append(w.tokens, fmt.Sprintf("[filler %d]", i))
		w.types = append(w.types, tokenTypeNormal)
	}
	return w.tokenizerKV(), nil
}
