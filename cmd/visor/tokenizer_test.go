package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/visorhq/visor/engine/modelgen"
	"github.com/visorhq/visor/internal/enginetest"
	"github.com/visorhq/visor/internal/testmodel"
)

// TestAskRefusesVisionModelWithoutTextTokens: a model whose vocabulary turns all text into no tokens would make
// every image request a prompt of only the image, on which llama-server aborts; ask must stop at start with an
// error naming the model, before any request.
func TestAskRefusesVisionModelWithoutTextTokens(t *testing.T) {
	enginetest.Binary(t)
	dir := t.TempDir()
	model, proj := filepath.Join(dir, "no-bytes.gguf"), filepath.Join(dir, "mmproj.gguf")
	if err := modelgen.WriteTextless(model, 1024); err != nil {
		t.Fatal(err)
	}
	if err := testmodel.WriteProjectorFile(proj, testmodel.ProjectorOptions{TextEmbeddingLength: 64}); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := visor(t, "ask", "hi", "--model", model, "--mmproj", proj, "--plan", "off", "--no-store")
	if err == nil || !strings.Contains(err.Error(), "no-bytes.gguf turns text into no tokens") {
		t.Fatalf("ask on a model without text tokens: %v\n%s", err, errOut)
	}
}
