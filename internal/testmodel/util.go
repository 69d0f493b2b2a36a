package testmodel

import (
	"encoding/binary"
	"math"

	"github.com/visorhq/visor/engine/gguf"
)

func f32Tensor(name string, data []float32, shape ...uint64) gguf.Tensor {
	return gguf.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32, Data: f32Bytes(data)}
}

// normTensor is an RMS-norm weight of n ones: a norm that only normalises.
func normTensor(name string, n int) gguf.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return f32Tensor(name, v, uint64(n))
}

// zeroTensor is an F32 tensor of zeros (nil data is written as zeros).
func zeroTensor(name string, shape ...uint64) gguf.Tensor {
	return gguf.Tensor{Name: name, Shape: shape, Type: gguf.TypeF32}
}

// f32Bytes encodes values as little-endian float32, the layout of an F32 tensor.
func f32Bytes(values []float32) []byte {
	b := make([]byte, 4*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// splitmix64 is a tiny deterministic generator: the models must be the same bytes on every platform and Go
// version, which math/rand does not promise.
type splitmix64 struct{ state uint64 }

func (s *splitmix64) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float32 returns a value in [0, 1).
func (s *splitmix64) float32() float32 {
	return float32(s.next()>>40) / (1 << 24)
}
