package testmodel

import (
	"fmt"
	"io"
	"math"

	"github.com/visorhq/visor/engine/gguf"
)

// Answer is what the chat model says whenever it does not call a tool.
const Answer = "Hi!"

// Shape of the chat model. n_embd holds one dimension per preference class (one-hot embeddings), the three
// context features and a band for image embeddings; the projector's output must match it. Heads are 32 wide
// because llama.cpp's quantized KV caches (q8_0, q4_0: blocks of 32) need the head size to be a multiple of 32.
const (
	ChatEmbeddingLength = 128
	chatBlocks          = 2
	chatHeads           = 4
	chatHeadDim         = ChatEmbeddingLength / chatHeads
	chatFeedForward     = 128
	chatContextLength   = 4096
	chatRMSEpsilon      = 1e-6
	// chatRopeBase is huge so that the rotary pair the feature heads use (the last pair of each head) turns by
	// less than 1e-6 rad over the whole context: their attention scores then ignore positions.
	chatRopeBase = 1e12
)

// Residual-stream layout: dims 0–15 are the one-hot preference classes, the last three hold the context
// features written by block 0's attention.
const (
	featOpen   = ChatEmbeddingLength - 3 // more <tool_call> than </tool_call> tokens: a call is open
	featTools  = ChatEmbeddingLength - 2 // a <tool_call> token is in the context: tools were offered
	featResult = ChatEmbeddingLength - 1 // a <tool_response> token is in the context: a tool has answered

	// Image embeddings (the projector's output) live in [imageDimLow, imageDimHigh): no class, no feature and
	// no weight of the chat model reads them, so an image changes nothing but the token count.
	imageDimLow  = 16
	imageDimHigh = featOpen
)

// Logit levels of the preference table. Ranks are 10 apart, more than the ≥ 8 that makes llama-server's default
// sampling (temperature 0.8, min_p 0.05) behave like greedy decoding: the runner-up is e^(-12.5) as likely and
// min_p drops it. Tokens no rule names get a fixed fallback order far below every rank, 10 apart as well, so
// when a grammar allows none of the ranked tokens the choice among the allowed ones (an enum value, a tool name)
// is still deterministic under any sampling settings: the lowest byte wins. Whitespace and special tokens come
// last so that a grammar's optional spaces are never taken when anything else fits.
const (
	topLogit      = 10
	rankStep      = 10
	fallbackLogit = -100
	fallbackStep  = 10

	// toolCallAfterNewline is <tool_call>'s base logit after "\n": below "H" (10) and "{" (0), so a plain chat
	// answers. The tools feature lifts it by featureBoost above "H"; the result feature takes the boost back.
	toolCallAfterNewline = -10
	// toolCallAfterCall keeps <tool_call> below <|im_end|> after </tool_call> even with the tools feature on,
	// so the model stops after one call.
	toolCallAfterCall = -60
	featureBoost      = 40
	// toolCallAfterAnswer is <tool_call>'s logit after "!": below <|im_end|> even with the tools feature on, above
	// every fallback so that a grammar that forbids EOS (tool_choice required after an answer) gets the call.
	toolCallAfterAnswer = -40
	// openPenalty times the open-call feature is taken from <tool_call>. The feature is (opened − closed) /
	// (opened + closed) over the context: 1/(2n+1) right after the model opens a call in a context holding n
	// closed ones (2 in the system prompt's instructions, 1 per earlier call). Without a grammar (raw mode,
	// tool_choice none) the model must not open a second call after "<tool_call>\n": the penalty keeps
	// <tool_call> below "H" there for n ≤ about 65, and below the call body (which callBodyBoost lifts twice as
	// fast) for every n where the body wins at all. With a grammar the question never arises.
	openPenalty = 4000

	// callBodyAfterNewline is TokenCallBody's base logit after "\n": below "{" (0), so a JSON answer
	// (response_format) starts byte by byte, and far below "H" (10). callBodyBoost times the open-call feature
	// lifts it: right after the model's "<tool_call>\n" in a context holding n closed calls the feature is
	// 1/(2n+1), and the body must beat "H" (10) by a rank gap of 8 after the RMS norm has shrunk the logits by up
	// to 6% (tools and result features on): callBodyBoost/(2n+1) ≥ 48.5, so n ≤ 81, 79 earlier calls besides
	// the system prompt's 2 examples. Without a grammar the model then writes the whole call; with one, the
	// grammar decides (see CallBody).
	callBodyAfterNewline = -30
	callBodyBoost        = 8000
	// callBodyElsewhere is its logit after every other class. The feature term is not tied to the class (it is a
	// separate column of output.weight), so inside an open call the body gets up to callBodyBoost everywhere;
	// this keeps it below every ranked token (the lowest is −70) even then, so the model never writes it twice or
	// in the middle of a JSON value.
	callBodyElsewhere = -callBodyBoost - 100
)

// Attention wiring of the three feature heads (block 0, heads 0–2; head 3 is zero).
const (
	// featureScore is the q and k entry. The normed input is √128 ≈ 11.3 on its class, so the score of a marked
	// token is (2·11.3)²/√32 ≈ 90: the marked tokens take all the weight (e^-90 is left for the rest).
	featureScore = 2.0
	featureOut   = 0.25 // attn_output entry: the feature's value in the residual stream
	rotaryDim    = chatHeadDim - 2
)

// rule says which tokens to prefer, best first, after any token of a class.
type rule struct {
	name  string // for the package doc and tests
	after []int  // tokens of the class; nil for the default class
	next  []int  // preferred next tokens, best first
}

// preferenceTable is the token-level behaviour of the chat model; see the package doc for why each rule is there.
// The first rule is the default class: every token not named in another rule's after list.
func preferenceTable() []rule {
	const (
		nl    = '\n'
		quote = '"'
	)
	valueEnd := []int{TokenIMEnd, '}', ']', TokenToolCallEnd, ',', quote, nl}
	return []rule{
		{name: "default", next: valueEnd},
		{name: "newline", after: []int{nl}, next: []int{'H', '{', TokenToolCallEnd, TokenIMEnd}},
		{name: "H", after: []int{'H'}, next: []int{'i'}},
		{name: "i", after: []int{'i'}, next: []int{'!'}},
		{name: "!", after: []int{'!'}, next: []int{TokenIMEnd}},
		{name: "<tool_call>", after: []int{TokenToolCall}, next: []int{nl, '{'}},
		{name: "{", after: []int{'{'}, next: []int{quote, '}'}},
		{name: "quote", after: []int{quote}, next: []int{'.', ':', '}', ']', ','}},
		{name: ".", after: []int{'.'}, next: []int{quote, '.'}},
		{name: ":", after: []int{':'}, next: []int{quote, '1', 't', '[', '{', '-', '0', 'n', 'f'}},
		{name: "[", after: []int{'['}, next: []int{quote, '1', 't', '{', '[', ']'}},
		{name: ",", after: []int{','}, next: []int{quote, '1', 't', '{', '['}},
		{name: "-", after: []int{'-'}, next: []int{'1'}},
		{name: "</tool_call>", after: []int{TokenToolCallEnd}, next: []int{TokenIMEnd, nl}},
		// After the whole call body close the call; a native grammar also takes </tool_call> right after the JSON.
		{name: "call body", after: []int{TokenCallBody}, next: []int{TokenToolCallEnd, TokenIMEnd, nl}},
		// Its own class only so that attention can spot it; it behaves like the default.
		{name: "<tool_response>", after: []int{TokenToolResponse}, next: valueEnd},
	}
}

// fallbackOrder lists every token in the order used below the ranked ones: bytes other than whitespace by value,
// then whitespace, then the special tokens.
func fallbackOrder() []int {
	var order, ws []int
	for t := range 256 {
		if t == ' ' || t == '\t' || t == '\n' || t == '\r' || t == '\v' || t == '\f' {
			ws = append(ws, t)
			continue
		}
		order = append(order, t)
	}
	order = append(order, ws...)
	for t := 256; t < VocabSize; t++ {
		order = append(order, t)
	}
	return order
}

// chatLogits returns the logit table, logits[class][token], before the feature terms.
func chatLogits(rules []rule) [][]float32 {
	order := fallbackOrder()
	out := make([][]float32, len(rules))
	for c, r := range rules {
		row := make([]float32, VocabSize)
		for k, t := range order {
			row[t] = float32(fallbackLogit - k*fallbackStep)
		}
		for rank, t := range r.next {
			row[t] = float32(topLogit - rank*rankStep)
		}
		row[TokenCallBody] = callBodyElsewhere
		switch r.name {
		case "newline":
			row[TokenToolCall] = toolCallAfterNewline
			row[TokenCallBody] = callBodyAfterNewline
		case "!":
			row[TokenToolCall] = toolCallAfterAnswer
		case "</tool_call>":
			row[TokenToolCall] = toolCallAfterCall
		}
		out[c] = row
	}
	return out
}

// tokenClasses maps every token id to its rule index.
func tokenClasses(rules []rule) ([]int, error) {
	class := make([]int, VocabSize)
	owner := make([]string, VocabSize)
	for c, r := range rules {
		for _, t := range r.after {
			if t < 0 || t >= VocabSize {
				return nil, fmt.Errorf("testmodel: rule %q names token %d outside the vocabulary", r.name, t)
			}
			if owner[t] != "" {
				return nil, fmt.Errorf("testmodel: token %d is in rules %q and %q", t, owner[t], r.name)
			}
			owner[t] = r.name
			class[t] = c
		}
	}
	return class, nil
}

// chatWiring is the architecture-independent part of the chat model: the vocabulary, the one-hot embeddings, the
// logit table and the three feature heads. Each architecture wires the heads into its own attention layout.
type chatWiring struct {
	tokens []string
	types  []int32
	class  []int
	nClass int
	embd   []float32 // [VocabSize][ChatEmbeddingLength]
	output []float32 // [VocabSize][ChatEmbeddingLength]
	heads  []featureHead
}

// featureHead is one attention head that finds marked tokens in the context and writes what it reads into dim.
type featureHead struct {
	tokens []markedToken
	dim    int
}

type markedToken struct {
	token int
	value float32 // the v entry: 1/√d, so the value read is exactly ±1 after the √d-scaled input norm
}

// tokenizerKV is the tokenizer and template metadata both architectures share.
func (w chatWiring) tokenizerKV() []gguf.KV {
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: w.tokens},
		{Key: "tokenizer.ggml.token_type", Value: w.types},
		// No merges: every byte stays its own token, so a text's tokens are its bytes and counts are predictable.
		{Key: "tokenizer.ggml.merges", Value: []string{}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(TokenEndOfText)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(TokenIMEnd)},
		{Key: "tokenizer.ggml.padding_token_id", Value: uint32(TokenEndOfText)},
		{Key: "tokenizer.ggml.add_bos_token", Value: false},
		{Key: "tokenizer.chat_template", Value: ChatTemplate},
	}
}

func newChatWiring() (chatWiring, error) {
	rules := preferenceTable()
	if len(rules) > imageDimLow {
		return chatWiring{}, fmt.Errorf("testmodel: %d preference classes do not fit one-hot beside the features in n_embd %d",
			len(rules), ChatEmbeddingLength)
	}
	class, err := tokenClasses(rules)
	if err != nil {
		return chatWiring{}, err
	}
	texts, types := vocabulary()

	const d = ChatEmbeddingLength
	// One-hot embeddings: token t's row is the unit vector of its class.
	embd := make([]float32, VocabSize*d)
	for t := range VocabSize {
		embd[t*d+class[t]] = 1
	}

	// After the final RMS norm the hidden state is ≈ √d·(e_class + f_tools·e_tools + f_result·e_result)/s with
	// s = √(1 + f²…) ≤ 1.07, so output.weight's column for a class is its logit row divided by √d, and a feature
	// column adds featureBoost to <tool_call> per unit of featureOut.
	scale := float32(1 / math.Sqrt(float64(d)))
	logits := chatLogits(rules)
	output := make([]float32, VocabSize*d)
	for t := range VocabSize {
		for c := range rules {
			output[t*d+c] = logits[c][t] * scale
		}
	}
	output[TokenToolCall*d+featTools] = featureBoost * scale / featureOut
	output[TokenToolCall*d+featResult] = -featureBoost * scale / featureOut
	output[TokenToolCall*d+featOpen] = -openPenalty * scale / featureOut
	output[TokenCallBody*d+featOpen] = callBodyBoost * scale / featureOut

	// v entry: the normed input is √d on its class, so a marked token's value is exactly 1 (−1 for </tool_call>
	// in the open head).
	featureValue := scale
	// Head 2 keys on both <tool_call> and </tool_call> with values +1 and −1, so it reads their balance.
	heads := []featureHead{
		{[]markedToken{{TokenToolCall, featureValue}}, featTools},
		{[]markedToken{{TokenToolResponse, featureValue}}, featResult},
		{[]markedToken{{TokenToolCall, featureValue}, {TokenToolCallEnd, -featureValue}}, featOpen},
	}
	return chatWiring{tokens: texts, types: types, class: class, nClass: len(rules), embd: embd, output: output,
		heads: heads}, nil
}

// chatModel returns the metadata and tensors of the chat model.
func chatModel() ([]gguf.KV, []gguf.Tensor, error) {
	w, err := newChatWiring()
	if err != nil {
		return nil, nil, err
	}
	kv := []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "visor tiny-bigram"},
		{Key: "general.file_type", Value: uint32(0)}, // all F32
		{Key: "llama.context_length", Value: uint32(chatContextLength)},
		{Key: "llama.embedding_length", Value: uint32(ChatEmbeddingLength)},
		{Key: "llama.block_count", Value: uint32(chatBlocks)},
		{Key: "llama.feed_forward_length", Value: uint32(chatFeedForward)},
		{Key: "llama.attention.head_count", Value: uint32(chatHeads)},
		{Key: "llama.attention.head_count_kv", Value: uint32(chatHeads)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(chatRMSEpsilon)},
		{Key: "llama.rope.dimension_count", Value: uint32(chatHeadDim)},
		{Key: "llama.rope.freq_base", Value: float32(chatRopeBase)},
		{Key: "llama.vocab_size", Value: uint32(VocabSize)},
	}
	kv = append(kv, w.tokenizerKV()...)

	const d = ChatEmbeddingLength
	// Block 0, heads 0 and 1: every query has the same entry q on the last rotary pair; only <tool_call>
	// (head 0) or <tool_response> (head 1) has a key there. A position that can see such a token puts all its
	// attention on it and reads its value, 1; one that cannot spreads attention over values that are all 0.
	// attn_output writes the head's result into the feature dimension.
	wq := make([]float32, d*d)
	wk := make([]float32, d*d)
	wv := make([]float32, d*d)
	wo := make([]float32, d*d)
	for h, head := range w.heads {
		qk := h*chatHeadDim + rotaryDim // weights are [out][in]: row = output unit
		val := h * chatHeadDim
		for c := range w.nClass {
			wq[qk*d+c] = featureScore
		}
		for _, m := range head.tokens {
			wk[qk*d+w.class[m.token]] = featureScore
			wv[val*d+w.class[m.token]] = m.value
		}
		wo[head.dim*d+val] = featureOut
	}

	tensors := w.outerTensors()
	for b := range chatBlocks {
		p := fmt.Sprintf("blk.%d.", b)
		attn := []gguf.Tensor{
			zeroTensor(p+"attn_q.weight", d, d), zeroTensor(p+"attn_k.weight", d, d),
			zeroTensor(p+"attn_v.weight", d, d), zeroTensor(p+"attn_output.weight", d, d),
		}
		if b == 0 {
			attn = []gguf.Tensor{
				f32Tensor(p+"attn_q.weight", wq, d, d), f32Tensor(p+"attn_k.weight", wk, d, d),
				f32Tensor(p+"attn_v.weight", wv, d, d), f32Tensor(p+"attn_output.weight", wo, d, d),
			}
		}
		// ffn_down is zero, so no block's MLP adds anything: the residual stream is the embedding plus the two
		// features and nothing else.
		tensors = append(tensors, normTensor(p+"attn_norm.weight", d))
		tensors = append(tensors, attn...)
		tensors = append(tensors,
			normTensor(p+"ffn_norm.weight", d),
			zeroTensor(p+"ffn_gate.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_up.weight", d, chatFeedForward),
			zeroTensor(p+"ffn_down.weight", chatFeedForward, d),
		)
	}
	return kv, tensors, nil
}

// WriteChat writes the chat model (GGUF v3, all F32, about 1.2 MB) to w. The bytes are the same on every call.
func WriteChat(w io.Writer) error {
	kv, tensors, err := chatModel()
	if err != nil {
		return err
	}
	if _, err := gguf.Write(w, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write chat model: %w", err)
	}
	return nil
}

// WriteChatFile writes the chat model to path, creating or truncating it.
func WriteChatFile(path string) error {
	kv, tensors, err := chatModel()
	if err != nil {
		return err
	}
	if err := gguf.WriteFile(path, kv, tensors); err != nil {
		return fmt.Errorf("testmodel: write chat model: %w", err)
	}
	return nil
}

// outerTensors are the tensors every chat-shaped model of this package opens with: the embedding, the final norm
// and the output table, so each architecture reads the same logits from the same wiring.
func (w *chatWiring) outerTensors() []gguf.Tensor {
	return []gguf.Tensor{
		f32Tensor("token_embd.weight", w.embd, ChatEmbeddingLength, VocabSize),
		normTensor("output_norm.weight", ChatEmbeddingLength),
		f32Tensor("output.weight", w.output, ChatEmbeddingLength, VocabSize),
	}
}
