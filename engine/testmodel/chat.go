package testmodel

import (
	"fmt"
	"io"
	"math"

	"github.com/visorhq/visor/engine/gguf"
)

// Shape of the chat model. n_embd must exceed the number of preference classes (one-hot embeddings) and is what
// the projector's output must match.
const (
	ChatEmbeddingLength = 64
	chatBlocks          = 2
	chatHeads           = 4
	chatFeedForward     = 128
	chatContextLength   = 4096
	chatRMSEpsilon      = 1e-6
)

// Logit levels of the preference table. Ranks are 10 apart, more than the ≥ 8 that makes llama-server's default
// sampling (temperature 0.8, min_p 0.05) behave like greedy decoding: the runner-up is e^(-12.5) as likely and
// min_p drops it. Tokens no rule names sit far below every rank with a little seeded noise, so when a grammar
// allows none of the ranked tokens the sampler picks among the allowed ones (enum values, digits) at random with a
// random seed and always the same one at temperature 0. Whitespace sits lower still so that a grammar's optional
// spaces are never taken when anything else fits.
const (
	topLogit        = 10
	rankStep        = 10
	fallbackLogit   = -100
	whitespaceLogit = -200
	noiseSeed       = 0x7e57_b16a_c0de_0001
)

// rule says which tokens to prefer, best first, after any token of a class.
type rule struct {
	name  string // for the package doc and tests
	after []int  // tokens of the class; nil for the default class
	next  []int  // preferred next tokens, best first
}

// preferenceTable is the whole generation behaviour of the chat model; see the package doc for why each rule is
// there. The first rule is the default class: every token not named in another rule's after list.
func preferenceTable() []rule {
	const (
		nl    = '\n'
		quote = '"'
	)
	valueStart := []int{quote, '1', 't', '[', '{', '-', '0', 'n', 'f'}
	return []rule{
		{name: "default", next: []int{TokenIMEnd, '}', ']', TokenToolCallEnd, ',', quote, nl}},
		{name: "newline", after: []int{nl}, next: []int{'H', '{', TokenToolCallEnd, TokenIMEnd, TokenToolCall}},
		{name: "H", after: []int{'H'}, next: []int{'i'}},
		{name: "i", after: []int{'i'}, next: []int{'!'}},
		{name: "!", after: []int{'!'}, next: []int{TokenIMEnd, TokenToolCall}},
		{name: "<tool_call>", after: []int{TokenToolCall}, next: []int{nl, '{'}},
		{name: "{", after: []int{'{'}, next: []int{quote, '}'}},
		{name: "quote", after: []int{quote}, next: []int{'.', ':', '}', ']', ','}},
		{name: ".", after: []int{'.'}, next: []int{quote, '.'}},
		{name: ":", after: []int{':'}, next: valueStart},
		{name: "[", after: []int{'['}, next: []int{quote, '1', 't', '{', '[', ']'}},
		{name: ",", after: []int{','}, next: []int{quote, '1', 't', '{', '['}},
		{name: "-", after: []int{'-'}, next: []int{'1'}},
		{name: "</tool_call>", after: []int{TokenToolCallEnd}, next: []int{TokenIMEnd, nl, TokenToolCall}},
	}
}

// chatLogits returns the logit table: logits[class][token].
func chatLogits(rules []rule) [][]float32 {
	rng := splitmix64{state: noiseSeed}
	out := make([][]float32, len(rules))
	for c, r := range rules {
		row := make([]float32, VocabSize)
		for t := range row {
			base := float32(fallbackLogit)
			if t == ' ' || t == '\t' || t == '\n' || t == '\r' {
				base = whitespaceLogit
			}
			row[t] = base + rng.float32()
		}
		for rank, t := range r.next {
			row[t] = float32(topLogit - rank*rankStep)
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

// chatModel returns the metadata and tensors of the chat model.
func chatModel() ([]gguf.KV, []gguf.Tensor, error) {
	rules := preferenceTable()
	if len(rules) > ChatEmbeddingLength {
		return nil, nil, fmt.Errorf("testmodel: %d preference classes do not fit one-hot in n_embd %d", len(rules), ChatEmbeddingLength)
	}
	class, err := tokenClasses(rules)
	if err != nil {
		return nil, nil, err
	}
	texts, types := vocabulary()
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
		{Key: "llama.rope.dimension_count", Value: uint32(ChatEmbeddingLength / chatHeads)},
		{Key: "llama.vocab_size", Value: uint32(VocabSize)},
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "default"},
		{Key: "tokenizer.ggml.tokens", Value: texts},
		{Key: "tokenizer.ggml.token_type", Value: types},
		// No merges: every byte stays its own token, so a text's tokens are its bytes and counts are predictable.
		{Key: "tokenizer.ggml.merges", Value: []string{}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(TokenEndOfText)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(TokenIMEnd)},
		{Key: "tokenizer.ggml.padding_token_id", Value: uint32(TokenEndOfText)},
		{Key: "tokenizer.ggml.add_bos_token", Value: false},
		{Key: "tokenizer.chat_template", Value: ChatTemplate},
	}

	const d = ChatEmbeddingLength
	// One-hot embeddings: token t's row is the unit vector of its class, so after the final RMS norm the hidden
	// state is sqrt(d)·e_class and output.weight's column for the class is the logit row divided by sqrt(d).
	embd := make([]float32, VocabSize*d)
	for t := range VocabSize {
		embd[t*d+class[t]] = 1
	}
	scale := float32(1 / math.Sqrt(float64(d)))
	logits := chatLogits(rules)
	output := make([]float32, VocabSize*d)
	for t := range VocabSize {
		for c := range rules {
			output[t*d+c] = logits[c][t] * scale
		}
	}
	ones := make([]float32, d)
	for i := range ones {
		ones[i] = 1
	}
	f32 := func(name string, data []float32, shape ...uint64) gguf.Tensor {
		return gguf.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32, Data: f32Bytes(data)}
	}
	zeros := func(name string, shape ...uint64) gguf.Tensor {
		return gguf.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32} // nil data: written as zeros
	}
	tensors := []gguf.Tensor{
		f32("token_embd.weight", embd, d, VocabSize),
		f32("output_norm.weight", ones, d),
		f32("output.weight", output, d, VocabSize),
	}
	// Every block adds zero to the residual stream: attn_output and ffn_down are zero, so the hidden state at a
	// position is its own token's embedding and the next-token logits depend on the last token only. The other
	// projections are zero too; they cannot matter.
	for b := range chatBlocks {
		p := fmt.Sprintf("blk.%d.", b)
		tensors = append(tensors,
			f32(p+"attn_norm.weight", ones, d),
			zeros(p+"attn_q.weight", d, d),
			zeros(p+"attn_k.weight", d, d),
			zeros(p+"attn_v.weight", d, d),
			zeros(p+"attn_output.weight", d, d),
			f32(p+"ffn_norm.weight", ones, d),
			zeros(p+"ffn_gate.weight", d, chatFeedForward),
			zeros(p+"ffn_up.weight", d, chatFeedForward),
			zeros(p+"ffn_down.weight", chatFeedForward, d),
		)
	}
	return kv, tensors, nil
}

// WriteChat writes the chat model (GGUF v3, all F32, about 460 KB) to w. The bytes are the same on every call.
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
