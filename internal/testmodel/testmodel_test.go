package testmodel

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/gguf"
)

// Pinned digests: any change to the models' bytes must be deliberate (and re-checked against llama-server).
const (
	chatSHA256      = "02834f5be4077885d14a6e1beda2f4dff62f5fd52950ffaa051b1fa58ca648f6"
	projectorSHA256 = "9fe5b9dfdf7f20800d2a4b708726af911d5eaea9caeddfb98501697b3f312831"
	hybridSHA256    = "5c63d96e1f592fcdc3d2d1bfa08d66d6f11114f0db308a09ae364a6f2529c410"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func chatBytes(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteChat(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func projectorBytes(t *testing.T, opt ProjectorOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteProjector(&buf, opt); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPinnedDigests(t *testing.T) {
	chat := chatBytes(t)
	if !bytes.Equal(chat, chatBytes(t)) {
		t.Fatal("two WriteChat calls differ")
	}
	if got := sha(chat); got != chatSHA256 {
		t.Errorf("chat model sha256 %s, pinned %s", got, chatSHA256)
	}
	proj := projectorBytes(t, ProjectorOptions{})
	if !bytes.Equal(proj, projectorBytes(t, ProjectorOptions{})) {
		t.Fatal("two WriteProjector calls differ")
	}
	if got := sha(proj); got != projectorSHA256 {
		t.Errorf("projector sha256 %s, pinned %s", got, projectorSHA256)
	}

	var hybrid bytes.Buffer
	if err := WriteHybrid(&hybrid); err != nil {
		t.Fatal(err)
	}
	if got := sha(hybrid.Bytes()); got != hybridSHA256 {
		t.Errorf("hybrid model sha256 %s, pinned %s", got, hybridSHA256)
	}

	// The file variants (sparse writes) hold the same bytes.
	dir := t.TempDir()
	hybridPath := filepath.Join(dir, HybridFileName)
	if err := WriteHybridFile(hybridPath); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(hybridPath); err != nil || !bytes.Equal(got, hybrid.Bytes()) {
		t.Errorf("%s differs from the io.Writer variant (%v)", HybridFileName, err)
	}
	chatPath, projPath, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{chatPath: chat, projPath: proj} {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the io.Writer variant", filepath.Base(path))
		}
	}
}

func TestChatHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chat.gguf")
	if err := WriteChatFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Arch() != "llama" {
		t.Errorf("version %d arch %q, want 3 llama", f.Version, f.Arch())
	}
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) != VocabSize {
		t.Fatalf("%d tokens, want %d", len(tokens), VocabSize)
	}
	for id, text := range map[int]string{'\n': "Ċ", ' ': "Ġ", 'H': "H", TokenIMEnd: "<|im_end|>",
		TokenToolCall: "<tool_call>", TokenToolResponse: "<tool_response>", TokenCallBody: CallBody} {
		if tokens[id] != text {
			t.Errorf("token %d is %q, want %q", id, tokens[id], text)
		}
	}
	seen := map[string]bool{}
	for _, tok := range tokens {
		if seen[tok] {
			t.Errorf("token text %q appears twice", tok)
		}
		seen[tok] = true
	}
	if tmpl, _ := f.String("tokenizer.chat_template"); tmpl != ChatTemplate {
		t.Error("chat template differs from ChatTemplate")
	}
	if eos, _ := f.Uint("tokenizer.ggml.eos_token_id"); eos != TokenIMEnd {
		t.Errorf("eos %d, want %d", eos, TokenIMEnd)
	}
	if bos, ok := f.Bool("tokenizer.ggml.add_bos_token"); !ok || bos {
		t.Error("add_bos_token must be false")
	}
	if merges, ok := f.Array("tokenizer.ggml.merges"); !ok || merges.Len() != 0 {
		t.Error("want an empty merges array")
	}
	if n := len(f.Tensors); n != 3+9*chatBlocks {
		t.Errorf("%d tensors, want %d", n, 3+9*chatBlocks)
	}
	if ti, ok := f.Tensor("output.weight"); !ok || ti.Type != gguf.TypeF32 || ti.Shape[0] != ChatEmbeddingLength ||
		ti.Shape[1] != VocabSize {
		t.Errorf("output.weight = %+v", ti)
	}
}

func TestByteTokenText(t *testing.T) {
	seen := map[string]byte{}
	for b := range 256 {
		s := byteTokenText(byte(b))
		if prev, dup := seen[s]; dup {
			t.Fatalf("bytes %d and %d both map to %q", prev, b, s)
		}
		seen[s] = byte(b)
	}
	// Fixed points of GPT-2's table: 0x00 → U+0100, space → U+0120, 0x7F → U+0121, 0xAD → U+0143.
	for b, want := range map[byte]rune{0: 0x100, ' ': 0x120, 0x7f: 0x121, 0xad: 0x143, 0xff: 0xff} {
		if got := byteTokenText(b); got != string(want) {
			t.Errorf("byte %#x → %q, want %q", b, got, string(want))
		}
	}
}

// logitsFor computes the chat model's next-token logits from the written output weights, for the last token and
// the three feature values block 0's attention would write (each 0 or 1 before scaling).
func logitsFor(t *testing.T, output []float32, last int, tools, result, open float64) []float64 {
	t.Helper()
	rules := preferenceTable()
	class, err := tokenClasses(rules)
	if err != nil {
		t.Fatal(err)
	}
	h := make([]float64, ChatEmbeddingLength)
	h[class[last]] = 1
	h[featTools] = featureOut * tools
	h[featResult] = featureOut * result
	h[featOpen] = featureOut * open
	var ss float64
	for _, v := range h {
		ss += v * v
	}
	norm := 1 / math.Sqrt(ss/ChatEmbeddingLength+chatRMSEpsilon)
	logits := make([]float64, VocabSize)
	for tok := range VocabSize {
		for i, v := range h {
			logits[tok] += float64(output[tok*ChatEmbeddingLength+i]) * v * norm
		}
	}
	return logits
}

func outputWeights(t *testing.T) []float32 {
	t.Helper()
	_, tensors, err := chatModel()
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range tensors {
		if ts.Name == "output.weight" {
			w := make([]float32, len(ts.Data)/4)
			for i := range w {
				w[i] = math.Float32frombits(binary.LittleEndian.Uint32(ts.Data[4*i:]))
			}
			return w
		}
	}
	t.Fatal("no output.weight")
	return nil
}

// greedy decodes without a grammar from last, with fixed features, up to n tokens or EOS.
func greedy(t *testing.T, output []float32, last int, tools, result, open float64, n int) []int {
	var out []int
	for range n {
		logits := logitsFor(t, output, last, tools, result, open)
		best := 0
		for tok, l := range logits {
			if l > logits[best] {
				best = tok
			}
		}
		out = append(out, best)
		if best == TokenIMEnd {
			break
		}
		last = best
	}
	return out
}

func text(tokens []int) string {
	var b strings.Builder
	for _, t := range tokens {
		switch {
		case t < 256:
			b.WriteByte(byte(t))
		case t == TokenIMEnd:
			b.WriteString("<|im_end|>")
		case t == TokenToolCall:
			b.WriteString("<tool_call>")
		case t == TokenToolCallEnd:
			b.WriteString("</tool_call>")
		case t == TokenCallBody:
			b.WriteString(CallBody)
		default:
			b.WriteString("<special>")
		}
	}
	return b.String()
}

// TestPreferences checks the decisions the package doc describes, on the weights as written.
func TestPreferences(t *testing.T) {
	w := outputWeights(t)
	if got := text(greedy(t, w, '\n', 0, 0, 0, 10)); got != Answer+"<|im_end|>" {
		t.Errorf("plain chat decodes %q, want Hi!<|im_end|>", got)
	}
	if got := text(greedy(t, w, '\n', 1, 1, 0, 10)); got != Answer+"<|im_end|>" {
		t.Errorf("after a tool result decodes %q, want Hi!<|im_end|>", got)
	}
	if got := text(greedy(t, w, '\n', 1, 0, 0, 1)); got != "<tool_call>" {
		t.Errorf("with tools and no result the turn starts %q, want <tool_call>", got)
	}
	// Right after "<tool_call>\n" without a grammar (raw mode) the model writes the whole call body as one token
	// and closes the call. The open-call feature is 1/(2n+1) for n closed calls in the context (2 are the system
	// prompt's examples); the package doc promises this up to n = 81 (79 earlier calls), with or without a result.
	const wantCall = CallBody + "</tool_call><|im_end|>"
	for _, n := range []int{2, 3, 40, 81} {
		for _, result := range []float64{0, 1} {
			open := 1 / float64(2*n+1)
			if got := text(greedy(t, w, '\n', 1, result, open, 10)); got != wantCall {
				t.Errorf("open call, %d closed, result %v: decodes %q, want %q", n, result, got, wantCall)
			}
			l := logitsFor(t, w, '\n', 1, result, open)
			for _, other := range []int{'H', '{', TokenToolCall} {
				if gap := l[TokenCallBody] - l[other]; gap < 8 {
					t.Errorf("open call, %d closed, result %v: body leads %d by %.1f, want ≥ 8", n, result, other, gap)
				}
			}
		}
	}
	// Outside a call (feature 0: balanced or no call tokens) the body stays below "{" after a newline, so a JSON
	// answer (response_format) is still written byte by byte.
	if l := logitsFor(t, w, '\n', 0, 0, 0); l['{']-l[TokenCallBody] < 8 {
		t.Errorf("outside a call the body (%.1f) is not a rank below { (%.1f)", l[TokenCallBody], l['{'])
	}

	// Rank gaps stay ≥ 8 under the feature's norm change, so default sampling is greedy.
	for _, f := range [][3]float64{{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}} {
		for _, r := range preferenceTable() {
			last := int('x') // a default-class token
			if r.after != nil {
				last = r.after[0]
			}
			l := logitsFor(t, w, last, f[0], f[1], f[2])
			for i := 1; i < len(r.next); i++ {
				if gap := l[r.next[i-1]] - l[r.next[i]]; gap < 8 && r.next[i] != TokenToolCall {
					t.Errorf("class %s features %v: gap %.1f between %d and %d", r.name, f, gap, r.next[i-1], r.next[i])
				}
			}
			// The open-call term is not tied to the class: even with the feature at its maximum the body must
			// stay below every ranked token outside the newline class, or the model would repeat it or write it
			// in the middle of a JSON value.
			if r.name != "newline" {
				for _, tok := range r.next {
					if l[TokenCallBody] > l[tok]-8 {
						t.Errorf("class %s features %v: body %.1f is not below ranked token %d (%.1f)", r.name, f,
							l[TokenCallBody], tok, l[tok])
					}
				}
			}
		}
	}
}

func TestProjectorOptions(t *testing.T) {
	if n, err := (ProjectorOptions{}).ImageTokens(); err != nil || n != 16 {
		t.Errorf("default image tokens %d, %v; want 16", n, err)
	}
	big := ProjectorOptions{ImageSize: 64, PatchSize: 8, EmbeddingLength: 64, Blocks: 3}
	if n, _ := big.ImageTokens(); n != 64 {
		t.Errorf("64/8 image tokens %d, want 64", n)
	}
	path := filepath.Join(t.TempDir(), "p.gguf")
	if err := WriteProjectorFile(path, big); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]uint64{"clip.vision.image_size": 64, "clip.vision.block_count": 3,
		"clip.vision.embedding_length": 64, "clip.vision.feed_forward_length": 256,
		"clip.vision.projection_dim": ChatEmbeddingLength} {
		if got, _ := f.Uint(key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	if ti, ok := f.Tensor("v.position_embd.weight"); !ok || ti.Shape[1] != 65 {
		t.Errorf("position_embd %+v, want 65 positions", ti)
	}
	if ti, ok := f.Tensor("mm.2.weight"); !ok || ti.Shape[1] != ChatEmbeddingLength {
		t.Errorf("mm.2.weight %+v, want output %d", ti, ChatEmbeddingLength)
	}
	for _, bad := range []ProjectorOptions{
		{ImageSize: 30, PatchSize: 8},
		{EmbeddingLength: 30, Heads: 4},
		{Blocks: 1},
		{PatchSize: -1},
		{EmbeddingLength: 64, FeedForwardLength: 64},
		{ImageSize: 1 << 16, PatchSize: 1, EmbeddingLength: 1 << 12},
	} {
		if err := WriteProjector(&bytes.Buffer{}, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// forward is a plain reimplementation of llama.cpp's llama forward pass for this model (RMS norm, attention with
// causal softmax, SwiGLU MLP, final norm and output), without RoPE: every nonzero q and k entry sits on the last
// rotary pair, which the rope base of 1e12 turns by less than 1e-7 rad over the context. It checks the wiring
// offline, where llama-server is not installed.
type forward struct {
	w map[string][]float32
}

func newForward(t *testing.T) *forward {
	t.Helper()
	_, tensors, err := chatModel()
	if err != nil {
		t.Fatal(err)
	}
	f := &forward{w: map[string][]float32{}}
	for _, ts := range tensors {
		n := (gguf.TensorInfo{Shape: ts.Shape, Type: ts.Type}).Elements()
		v := make([]float32, n)
		for i := range v {
			if ts.Data != nil {
				v[i] = math.Float32frombits(binary.LittleEndian.Uint32(ts.Data[4*i:]))
			}
		}
		f.w[ts.Name] = v
	}
	return f
}

func rmsNorm(x []float64, w []float32) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+chatRMSEpsilon)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * float64(w[i])
	}
	return out
}

// matVec multiplies a GGUF matrix of shape [in, out] (rows of length in) by x.
func matVec(w []float32, x []float64, out int) []float64 {
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		for i, v := range x {
			y[o] += float64(w[o*in+i]) * v
		}
	}
	return y
}

// logits returns the next-token logits after tokens.
func (f *forward) logits(tokens []int) []float64 {
	const d = ChatEmbeddingLength
	xs := make([][]float64, len(tokens))
	for p, tok := range tokens {
		x := make([]float64, d)
		for i := range d {
			x[i] = float64(f.w["token_embd.weight"][tok*d+i])
		}
		xs[p] = x
	}
	for b := range chatBlocks {
		pre := fmt.Sprintf("blk.%d.", b)
		qs, ks, vs := make([][]float64, len(xs)), make([][]float64, len(xs)), make([][]float64, len(xs))
		for p, x := range xs {
			n := rmsNorm(x, f.w[pre+"attn_norm.weight"])
			qs[p], ks[p], vs[p] = matVec(f.w[pre+"attn_q.weight"], n, d), matVec(f.w[pre+"attn_k.weight"], n, d),
				matVec(f.w[pre+"attn_v.weight"], n, d)
		}
		for p := range xs {
			attn := make([]float64, d)
			for h := range chatHeads {
				lo, hi := h*chatHeadDim, (h+1)*chatHeadDim
				scores := make([]float64, p+1)
				maxScore := math.Inf(-1)
				for j := 0; j <= p; j++ {
					for i := lo; i < hi; i++ {
						scores[j] += qs[p][i] * ks[j][i]
					}
					scores[j] /= math.Sqrt(chatHeadDim)
					maxScore = math.Max(maxScore, scores[j])
				}
				var sum float64
				for j := range scores {
					scores[j] = math.Exp(scores[j] - maxScore)
					sum += scores[j]
				}
				for j := range scores {
					for i := lo; i < hi; i++ {
						attn[i] += scores[j] / sum * vs[j][i]
					}
				}
			}
			out := matVec(f.w[pre+"attn_output.weight"], attn, d)
			for i := range d {
				xs[p][i] += out[i]
			}
			n := rmsNorm(xs[p], f.w[pre+"ffn_norm.weight"])
			gate := matVec(f.w[pre+"ffn_gate.weight"], n, chatFeedForward)
			up := matVec(f.w[pre+"ffn_up.weight"], n, chatFeedForward)
			for i := range gate {
				gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
			}
			down := matVec(f.w[pre+"ffn_down.weight"], gate, d)
			for i := range d {
				xs[p][i] += down[i]
			}
		}
	}
	last := rmsNorm(xs[len(xs)-1], f.w["output_norm.weight"])
	return matVec(f.w["output.weight"], last, VocabSize)
}

// tokenize splits text into special tokens and bytes, as llama.cpp does for this vocabulary.
func tokenize(text string) []int {
	specials := map[string]int{"<|endoftext|>": TokenEndOfText, "<|im_start|>": TokenIMStart,
		"<|im_end|>": TokenIMEnd, "<tool_call>": TokenToolCall, "</tool_call>": TokenToolCallEnd,
		"<tool_response>": TokenToolResponse, "</tool_response>": TokenToolResponseEnd, CallBody: TokenCallBody}
	var out []int
	for len(text) > 0 {
		matched := false
		for s, id := range specials {
			if strings.HasPrefix(text, s) {
				out, text, matched = append(out, id), text[len(s):], true
				break
			}
		}
		if !matched {
			out, text = append(out, int(text[0])), text[1:]
		}
	}
	return out
}

// TestForward decodes greedily, without a grammar, through the whole network: the features come from real
// attention over real prompts rendered the way ChatTemplate renders them.
func TestForward(t *testing.T) {
	f := newForward(t)
	const tools = "<|im_start|>system\n# Tools\n\n<tools>\n{}\n</tools>\n\ninside <tool_call></tool_call> tags:\n" +
		"<tool_call>\n{\"name\": <function-name>}\n</tool_call><|im_end|>\n"
	const ask = "<|im_start|>user\nls<|im_end|>\n"
	const call = "<|im_start|>assistant\n<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\":\".\"}}\n" +
		"</tool_call><|im_end|>\n"
	const result = "<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n"
	const gen = "<|im_start|>assistant\n"
	// Raw mode: the model's own call replayed as text (it tokenizes back to the body token) and the result
	// returned in a user turn as visor's Hermes prompt does.
	const rawCall = "<|im_start|>assistant\n<tool_call>\n" + CallBody + "</tool_call><|im_end|>\n"
	const rawResult = "<|im_start|>user\n<tool_response>\n{\"name\": \"list_dir\", \"content\": \"a.txt\"}\n" +
		"</tool_response><|im_end|>\n"
	for _, c := range []struct{ name, prompt, want string }{
		{"no tools", ask + gen, Answer + "<|im_end|>"},
		// Without a grammar (raw mode, tool_choice none) the call opens and the open feature brings the body.
		{"tools", tools + ask + gen, "<tool_call>\n" + CallBody + "</tool_call><|im_end|>"},
		{"raw result", tools + ask + rawCall + rawResult + gen, Answer + "<|im_end|>"},
		{"raw second call", tools + ask + rawCall + rawResult + gen + Answer + "<|im_end|>\n" + ask + gen,
			Answer + "<|im_end|>"},
		{"after result", tools + ask + call + result + gen, Answer + "<|im_end|>"},
		{"next turn", tools + ask + call + result + gen + Answer + "<|im_end|>\n" + ask + gen, Answer + "<|im_end|>"},
	} {
		tokens := tokenize(c.prompt)
		var got []int
		for range 12 {
			l := f.logits(tokens)
			best := 0
			for tok, v := range l {
				if v > l[best] {
					best = tok
				}
			}
			got, tokens = append(got, best), append(tokens, best)
			if best == TokenIMEnd {
				break
			}
		}
		if s := text(got); s != c.want {
			t.Errorf("%s: decoded %q, want %q", c.name, s, c.want)
		}
	}
}

// BenchmarkFiles measures Files, which tests call once each (the goal is well under 100 ms); a benchmark rather
// than a timed assertion, because a clock in a unit test measures the machine's load.
func BenchmarkFiles(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, _, err := Files(dir); err != nil {
			b.Fatal(err)
		}
	}
}
