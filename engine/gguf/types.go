package gguf

import (
	"fmt"
	"math/bits"
)

// Type is a ggml tensor type as stored in a GGUF tensor table (enum ggml_type in ggml.h).
type Type uint32

// The ggml tensor types. Gaps are ids upstream retired (Q4_2, Q4_3, the Q4_0_x_y and IQ4_NL_x_y repacks); a file
// naming them is rejected because llama.cpp rejects it too.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
	TypeNVFP4   Type = 40
	TypeQ1_0    Type = 41
	TypeQ2_0    Type = 42
)

// typeInfo is the storage layout of one ggml type: BlockSize elements are stored in TypeSize bytes.
type typeInfo struct {
	name      string
	blockSize uint64
	typeSize  uint64
}

// types holds the block layouts of ggml-common.h. The sizes are the byte counts of the block structs, e.g. Q4_K is
// two f16 scales, 12 bytes of packed sub-block scales and 128 bytes of nibbles for 256 weights.
var types = map[Type]typeInfo{
	TypeF32:     {"f32", 1, 4},
	TypeF16:     {"f16", 1, 2},
	TypeQ4_0:    {"q4_0", 32, 18},
	TypeQ4_1:    {"q4_1", 32, 20},
	TypeQ5_0:    {"q5_0", 32, 22},
	TypeQ5_1:    {"q5_1", 32, 24},
	TypeQ8_0:    {"q8_0", 32, 34},
	TypeQ8_1:    {"q8_1", 32, 36},
	TypeQ2_K:    {"q2_K", 256, 84},
	TypeQ3_K:    {"q3_K", 256, 110},
	TypeQ4_K:    {"q4_K", 256, 144},
	TypeQ5_K:    {"q5_K", 256, 176},
	TypeQ6_K:    {"q6_K", 256, 210},
	TypeQ8_K:    {"q8_K", 256, 292},
	TypeIQ2_XXS: {"iq2_xxs", 256, 66},
	TypeIQ2_XS:  {"iq2_xs", 256, 74},
	TypeIQ3_XXS: {"iq3_xxs", 256, 98},
	TypeIQ1_S:   {"iq1_s", 256, 50},
	TypeIQ4_NL:  {"iq4_nl", 32, 18},
	TypeIQ3_S:   {"iq3_s", 256, 110},
	TypeIQ2_S:   {"iq2_s", 256, 82},
	TypeIQ4_XS:  {"iq4_xs", 256, 136},
	TypeI8:      {"i8", 1, 1},
	TypeI16:     {"i16", 1, 2},
	TypeI32:     {"i32", 1, 4},
	TypeI64:     {"i64", 1, 8},
	TypeF64:     {"f64", 1, 8},
	TypeIQ1_M:   {"iq1_m", 256, 56},
	TypeBF16:    {"bf16", 1, 2},
	TypeTQ1_0:   {"tq1_0", 256, 54},
	TypeTQ2_0:   {"tq2_0", 256, 66},
	TypeMXFP4:   {"mxfp4", 32, 17},
	TypeNVFP4:   {"nvfp4", 64, 36},
	TypeQ1_0:    {"q1_0", 128, 18},
	TypeQ2_0:    {"q2_0", 64, 18},
}

// Valid reports whether t is a type this package knows the layout of.
func (t Type) Valid() bool { _, ok := types[t]; return ok }

// String returns llama.cpp's lower-case name ("q4_K", "bf16"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one storage block (1 for plain types, 32 or 256 for most quants).
func (t Type) BlockSize() uint64 { return types[t].blockSize }

// TypeSize is the number of bytes of one storage block.
func (t Type) TypeSize() uint64 { return types[t].typeSize }

// RowBytes returns the bytes of n consecutive elements, as ggml_row_size does; n must be a multiple of the block
// size.
func (t Type) RowBytes(n uint64) uint64 {
	ti := types[t]
	if ti.blockSize == 0 {
		return 0
	}
	return n / ti.blockSize * ti.typeSize
}

// ParseType maps a llama.cpp type name ("q4_0", "Q4_K", "bf16") to its Type.
func ParseType(name string) (Type, error) {
	for t, ti := range types {
		if equalFold(ti.name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown ggml type %q (want e.g. f16, q8_0, q4_0, bf16)", name)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// ValueType is the type tag of a metadata value (enum gguf_type).
type ValueType uint32

// Metadata value types.
const (
	Uint8   ValueType = 0
	Int8    ValueType = 1
	Uint16  ValueType = 2
	Int16   ValueType = 3
	Uint32  ValueType = 4
	Int32   ValueType = 5
	Float32 ValueType = 6
	Bool    ValueType = 7
	String  ValueType = 8
	ArrayT  ValueType = 9
	Uint64  ValueType = 10
	Int64   ValueType = 11
	Float64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
	"array", "uint64", "int64", "float64"}

func (v ValueType) String() string {
	if int(v) < len(valueTypeNames) {
		return valueTypeNames[v]
	}
	return fmt.Sprintf("value_type(%d)", uint32(v))
}

// size is the encoded size of a fixed-size value, 0 for strings and arrays.
func (v ValueType) size() int {
	switch v {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// TensorInfo is one row of the tensor table.
type TensorInfo struct {
	Name string `json:"name"`
	// Shape is ggml's ne: Shape[0] is the contiguous (row) dimension.
	Shape []uint64 `json:"shape"`
	Type  Type     `json:"type"`
	// Offset is relative to the start of the data section (File.DataOffset).
	Offset uint64 `json:"offset"`
}

// Elements returns the number of elements (the product of the shape).
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes returns the exact size of the tensor's data, as ggml_nbytes computes it for a contiguous tensor.
func (t TensorInfo) Bytes() uint64 {
	if len(t.Shape) == 0 {
		return t.Type.RowBytes(1)
	}
	n := t.Type.RowBytes(t.Shape[0])
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// checkShape validates a shape for type t: at most 4 dimensions, rows a whole number of blocks, and an element
// and byte count that fit in int64 (ggml's limit).
func checkShape(shape []uint64, t Type) error {
	if len(shape) > maxDims {
		return fmt.Errorf("%d dimensions (ggml allows %d)", len(shape), maxDims)
	}
	if !t.Valid() {
		return fmt.Errorf("unknown ggml type %d", uint32(t))
	}
	if len(shape) > 0 && shape[0]%t.BlockSize() != 0 {
		return fmt.Errorf("row length %d is not a multiple of %s's block size %d", shape[0], t, t.BlockSize())
	}
	n := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > 1<<62 {
			return fmt.Errorf("shape %v overflows", shape)
		}
		n = lo
	}
	// Bytes per element is at most 8 for every type, so n ≤ 2^62 keeps the byte count in uint64; ggml caps at int64.
	if b := (TensorInfo{Shape: shape, Type: t}).Bytes(); b > 1<<62 {
		return fmt.Errorf("shape %v is too large (%d bytes)", shape, b)
	}
	return nil
}

const maxDims = 4
