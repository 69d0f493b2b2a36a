package modelgen_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/visorhq/visor/engine"
	"github.com/visorhq/visor/engine/gguf"
	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestVocabAnswersImages starts a real llama-server on a small model with Vocab's tokenizer and a projector, as
// the GPU check's stand-ins are built: text must tokenize one token per byte, and a request with an image and a
// question must be answered. With a vocabulary of only "t0", "t1", … every text tokenized to nothing, the image
// request became a prompt of only the image, and the server aborted on it (GGML_ASSERT(batch.size() > 0)).
func TestVocabAnswersImages(t *testing.T) {
	dir := t.TempDir()
	const embd = 64
	kv, ts, err := modelgen.Llama(modelgen.LlamaShape{Embd: embd, Layers: 2, Heads: 4, HeadsKV: 4, FF: 128, Ctx: 2048,
		Type: gguf.TypeF32, Random: true, Seed: 3}, &gguf.File{Name: "vocab", KV: modelgen.Vocab(512)})
	if err != nil {
		t.Fatal(err)
	}
	model, proj := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "mmproj.gguf")
	if err := gguf.WriteFile(model, kv, ts); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteProjectorFile(proj, testmodel.ProjectorOptions{TextEmbeddingLength: embd}); err != nil {
		t.Fatal(err)
	}
	s := enginetest.Start(t, llamacpp.Config{Model: model, MMProj: proj, Ctx: 2048, Parallel: 1})
	ctx := context.Background()
	c := s.Client()

	const question = "Describe this screenshot in one sentence."
	toks, err := c.Tokenize(ctx, question)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != len(question) {
		t.Errorf("%q tokenized to %d tokens, want one per byte (%d)", question, len(toks), len(question))
	}
	if err := llamacpp.CheckTokenizer(ctx, c, "m.gguf"); err != nil {
		t.Errorf("CheckTokenizer: %v", err)
	}

	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	img.SetRGBA(0, 0, color.RGBA{255, 0, 0, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	r, err := c.Chat(ctx, engine.Request{ChatCompletionRequest: openai.ChatCompletionRequest{MaxTokens: 2,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			engine.ImagePart("image/png", b.Bytes()), {Type: openai.ChatMessagePartTypeText, Text: question}}}}}})
	if err != nil {
		t.Fatalf("image request: %v (server: %v)", err, s.Err())
	}
	// The image's tokens come on top of the question's and the chat template's.
	if r.Usage.PromptTokens <= len(question) {
		t.Errorf("image request had %d prompt tokens, want more than the question's %d", r.Usage.PromptTokens, len(question))
	}
}
