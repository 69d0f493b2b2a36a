package testmodel

import (
	"fmt"
	"os"
	"path/filepath"
)

// File names Files writes.
const (
	ChatFileName      = "tiny-bigram.gguf"
	HybridFileName    = "tiny-hybrid.gguf"
	ProjectorFileName = "tiny-mmproj.gguf"
)

// Files writes the chat model and the default projector into dir (made if missing) and returns their paths. It
// takes a few milliseconds, so tests can call it per test with t.TempDir().
func Files(dir string) (chat, projector string, err error) {
	chat = filepath.Join(dir, ChatFileName)
	projector = filepath.Join(dir, ProjectorFileName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("the tiny models' folder: %w", err)
	}
	if err := WriteChatFile(chat); err != nil {
		return "", "", fmt.Errorf("testmodel: files in %s: %w", dir, err)
	}
	if err := WriteProjectorFile(projector, ProjectorOptions{}); err != nil {
		return "", "", fmt.Errorf("testmodel: files in %s: %w", dir, err)
	}
	return chat, projector, nil
}

// HybridFiles writes the hybrid (qwen35) chat model and the projector built with opt into dir and returns their
// paths.
func HybridFiles(dir string, opt ProjectorOptions) (chat, projector string, err error) {
	chat = filepath.Join(dir, HybridFileName)
	projector = filepath.Join(dir, ProjectorFileName)
	if err := WriteHybridFile(chat); err != nil {
		return "", "", fmt.Errorf("testmodel: files in %s: %w", dir, err)
	}
	if err := WriteProjectorFile(projector, opt); err != nil {
		return "", "", fmt.Errorf("testmodel: files in %s: %w", dir, err)
	}
	return chat, projector, nil
}
