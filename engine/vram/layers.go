package vram

import (
	"strconv"
	"strings"

	"github.com/visorhq/visor/engine/gguf"
)

// layerBytes splits the tensor bytes by where a layer split puts them: blk.N.* tensors with layer N, everything
// else but the host-resident token embedding with the output layer (output head and norm, which llama.cpp places
// on the last device). A tensor naming a block at or past blocks counts with the output layer too.
func layerBytes(f *gguf.File, blocks int) (layers []uint64, output uint64) {
	layers = make([]uint64, blocks)
	for _, t := range f.Tensors {
		if t.Name == "token_embd.weight" {
			continue
		}
		if i, ok := blockIndex(t.Name); ok && i < blocks {
			layers[i] += t.Bytes()
			continue
		}
		output += t.Bytes()
	}
	return layers, output
}

// blockIndex reads N from a tensor named blk.N.…
func blockIndex(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	return i, err == nil && i >= 0
}
