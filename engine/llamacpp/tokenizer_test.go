package llamacpp_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/internal/enginetest"
)

// TestCheckTokenizerRefusesVocabWithoutBytes starts a real server on a model whose vocabulary has only
// multi-character tokens and no merges (what header-only stand-ins had before modelgen.Vocab got its byte
// tokens): llama.cpp tokenizes every text to nothing there, so the check must refuse the model by name. TestWarmup
// checks that a working vocabulary passes.
func TestCheckTokenizerRefusesVocabWithoutBytes(t *testing.T) {
	model := filepath.Join(t.TempDir(), "no-bytes.gguf")
	if err := modelgen.WriteTextless(model, 512); err != nil {
		t.Fatal(err)
	}
	s := enginetest.Start(t, llamacpp.Config{Model: model, Ctx: 512, Parallel: 1})
	err := llamacpp.CheckTokenizer(context.Background(), s.Client(), "no-bytes.gguf")
	if err == nil || !strings.Contains(err.Error(), "no-bytes.gguf") || !strings.Contains(err.Error(), "no tokens") {
		t.Fatalf("CheckTokenizer = %v, want an error naming no-bytes.gguf and saying text gives no tokens", err)
	}
}
