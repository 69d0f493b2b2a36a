package gguf

import (
	"bytes"
	"testing"
)

// FuzzRead feeds arbitrary bytes to the reader. It must never panic; when a header parses and the writer accepts
// it, writing, reading and writing again must give the same bytes.
func FuzzRead(f *testing.F) {
	f.Add(encode(f, allValues(), smallTensors()))
	f.Add(encode(f, []KV{{"general.alignment", uint32(64)}, {"general.architecture", "llama"}},
		[]Tensor{{Name: "x", Shape: []uint64{32, 2}, Type: TypeQ8_0}}))
	f.Add(header(3, 0, 0))
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ReadAt(bytes.NewReader(data), int64(len(data)), "fuzz")
		if _, serr := Read(bytes.NewReader(data), "fuzz"); err == nil && serr != nil {
			t.Fatalf("ReadAt accepted what Read rejects: %v", serr)
		}
		if err != nil {
			return
		}
		ts := make([]Tensor, len(g.Tensors))
		for i, ti := range g.Tensors {
			ts[i] = Tensor{Name: ti.Name, Shape: ti.Shape, Type: ti.Type}
		}
		h1, _, _, err := Header(g.KV, ts)
		if err != nil {
			return // e.g. a tensor name longer than llama.cpp allows: readable, not writable
		}
		g2, err := Read(bytes.NewReader(h1), "rewritten")
		if err != nil {
			t.Fatalf("re-read of written header: %v", err)
		}
		ts2 := make([]Tensor, len(g2.Tensors))
		for i, ti := range g2.Tensors {
			ts2[i] = Tensor{Name: ti.Name, Shape: ti.Shape, Type: ti.Type}
		}
		h2, _, _, err := Header(g2.KV, ts2)
		if err != nil || !bytes.Equal(h1, h2) {
			t.Fatalf("write-read-write is not stable: %v", err)
		}
	})
}
