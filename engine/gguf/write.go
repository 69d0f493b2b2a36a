package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// Tensor is a tensor to write. A nil Data stands for all zeros: WriteFile leaves that range as a hole in a sparse
// file, so a header-only model of many GB is written in milliseconds and takes no disk space.
type Tensor struct {
	Name  string
	Shape []uint64
	Type  Type
	Data  []byte
}

// maxNameLen is llama.cpp's GGML_MAX_NAME minus the terminating NUL: longer tensor names are rejected on load.
const maxNameLen = 63

// Header encodes the header (magic through the tensor table, padded to the alignment) of a GGUF v3 file holding
// kv and tensors, and returns it with each tensor's data offset relative to the data section and the total file
// size. The output depends only on the arguments, so files are reproducible byte for byte.
//
// Values may be uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, float64, bool, string, Array, or
// a typed slice of those scalars ([]string, []float32, []int32 …), which is written as an array. The alignment is
// general.alignment when kv sets it (as uint32), else DefaultAlignment.
func Header(kv []KV, tensors []Tensor) (header []byte, offsets []uint64, size uint64, err error) {
	align := uint64(DefaultAlignment)
	seen := make(map[string]bool, len(kv))
	var e encoder
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kv)))
	for _, p := range kv {
		if seen[p.Key] {
			return nil, nil, 0, fmt.Errorf("gguf: duplicate metadata key %q", p.Key)
		}
		seen[p.Key] = true
		if p.Key == "general.alignment" {
			a, ok := p.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, nil, 0, fmt.Errorf("gguf: general.alignment must be a power-of-two uint32, got %v (%T)", p.Value, p.Value)
			}
			align = uint64(a)
		}
		e.str(p.Key)
		if err := e.value(p.Value, 0); err != nil {
			return nil, nil, 0, fmt.Errorf("gguf: metadata %q: %w", p.Key, err)
		}
	}
	offsets = make([]uint64, len(tensors))
	names := make(map[string]bool, len(tensors))
	var off uint64
	for i, t := range tensors {
		if names[t.Name] {
			return nil, nil, 0, fmt.Errorf("gguf: duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		if len(t.Name) > maxNameLen {
			return nil, nil, 0, fmt.Errorf("gguf: tensor name %q is longer than llama.cpp's %d-byte limit", t.Name, maxNameLen)
		}
		if err := checkShape(t.Shape, t.Type); err != nil {
			return nil, nil, 0, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		info := TensorInfo{Name: t.Name, Shape: t.Shape, Type: t.Type}
		if t.Data != nil && uint64(len(t.Data)) != info.Bytes() {
			return nil, nil, 0, fmt.Errorf("gguf: tensor %q: %d data bytes, shape %v of %s needs %d",
				t.Name, len(t.Data), t.Shape, t.Type, info.Bytes())
		}
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(off)
		offsets[i] = off
		off = alignUp(off+info.Bytes(), align)
	}
	for uint64(e.b.Len())%align != 0 {
		e.b.WriteByte(0)
	}
	// Like gguf.cpp and gguf-py, pad after the last tensor too: readers that load the whole data section at once
	// expect every tensor's padded size.
	size = uint64(e.b.Len()) + off
	return e.b.Bytes(), offsets, size, nil
}

// Write writes a complete GGUF v3 file to w, zeros included for tensors without Data, and returns the bytes
// written.
func Write(w io.Writer, kv []KV, tensors []Tensor) (int64, error) {
	hdr, offsets, size, err := Header(kv, tensors)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	n, err := bw.Write(hdr)
	written := int64(n)
	if err != nil {
		return written, fmt.Errorf("gguf: write header: %w", err)
	}
	var pos uint64
	zero := make([]byte, 64<<10)
	pad := func(k uint64) error {
		for k > 0 {
			c := min(k, uint64(len(zero)))
			n, err := bw.Write(zero[:c])
			written += int64(n)
			if err != nil {
				return fmt.Errorf("gguf: write data: %w", err)
			}
			k -= c
		}
		return nil
	}
	for i, t := range tensors {
		if err := pad(offsets[i] - pos); err != nil {
			return written, err
		}
		nb := TensorInfo{Shape: t.Shape, Type: t.Type}.Bytes()
		if t.Data == nil {
			err = pad(nb)
		} else {
			n, err = bw.Write(t.Data)
			written += int64(n)
		}
		if err != nil {
			return written, fmt.Errorf("gguf: write tensor %q: %w", t.Name, err)
		}
		pos = offsets[i] + nb
	}
	if err := pad(size - uint64(len(hdr)) - pos); err != nil {
		return written, err
	}
	if err := bw.Flush(); err != nil {
		return written, fmt.Errorf("gguf: write: %w", err)
	}
	return written, nil
}

// WriteFile writes a GGUF v3 file at path (created or truncated). Tensors without Data become holes of a sparse
// file, so the result has the right size and reads back as zeros without the disk space.
func WriteFile(path string, kv []KV, tensors []Tensor) (err error) {
	hdr, offsets, size, err := Header(kv, tensors)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("gguf: %w", cerr)
		}
	}()
	if _, err := f.Write(hdr); err != nil {
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	base := int64(len(hdr))
	for i, t := range tensors {
		if t.Data == nil {
			continue
		}
		if _, err := f.WriteAt(t.Data, base+int64(offsets[i])); err != nil {
			return fmt.Errorf("gguf: write tensor %q to %s: %w", t.Name, path, err)
		}
	}
	if err := f.Truncate(int64(size)); err != nil {
		return fmt.Errorf("gguf: size %s to %d bytes: %w", path, size, err)
	}
	return nil
}

type encoder struct{ b bytes.Buffer }

func (e *encoder) raw(p []byte) { e.b.Write(p) }
func (e *encoder) u32(v uint32) { e.b.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.b.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.b.WriteString(s) }

// value writes a type tag and a value.
func (e *encoder) value(v any, depth int) error {
	vt, err := typeOf(v)
	if err != nil {
		return err
	}
	e.u32(uint32(vt))
	return e.payload(v, depth)
}

func typeOf(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return Uint8, nil
	case int8:
		return Int8, nil
	case uint16:
		return Uint16, nil
	case int16:
		return Int16, nil
	case uint32:
		return Uint32, nil
	case int32:
		return Int32, nil
	case uint64:
		return Uint64, nil
	case int64:
		return Int64, nil
	case float32:
		return Float32, nil
	case float64:
		return Float64, nil
	case bool:
		return Bool, nil
	case string:
		return String, nil
	case Array, []uint8, []int8, []uint16, []int16, []uint32, []int32, []uint64, []int64, []float32, []float64,
		[]bool, []string, []Array:
		return ArrayT, nil
	}
	return 0, fmt.Errorf("unsupported value type %T (use a sized type such as uint32 or int32, not int)", v)
}

// payload writes a value without its type tag.
func (e *encoder) payload(v any, depth int) error {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		e.b.WriteByte(x)
	case int8:
		e.b.WriteByte(byte(x))
	case bool:
		if x {
			e.b.WriteByte(1)
		} else {
			e.b.WriteByte(0)
		}
	case uint16:
		e.b.Write(le.AppendUint16(nil, x))
	case int16:
		e.b.Write(le.AppendUint16(nil, uint16(x)))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	case Array:
		return e.array(x, depth)
	default:
		a, err := arrayOf(v)
		if err != nil {
			return err
		}
		return e.array(a, depth)
	}
	return nil
}

// arrayOf wraps a typed slice as an Array.
func arrayOf(v any) (Array, error) {
	var et ValueType
	switch v.(type) {
	case []uint8:
		et = Uint8
	case []int8:
		et = Int8
	case []uint16:
		et = Uint16
	case []int16:
		et = Int16
	case []uint32:
		et = Uint32
	case []int32:
		et = Int32
	case []uint64:
		et = Uint64
	case []int64:
		et = Int64
	case []float32:
		et = Float32
	case []float64:
		et = Float64
	case []bool:
		et = Bool
	case []string:
		et = String
	case []Array:
		et = ArrayT
	default:
		return Array{}, fmt.Errorf("unsupported value type %T", v)
	}
	return Array{Type: et, Values: v}, nil
}

func (e *encoder) array(a Array, depth int) error {
	if depth >= maxNesting {
		return fmt.Errorf("arrays nested deeper than %d", maxNesting)
	}
	want, err := arrayOf(a.Values)
	if err != nil {
		return fmt.Errorf("array: %w", err)
	}
	if want.Type != a.Type {
		return fmt.Errorf("array says element type %v but holds %T", a.Type, a.Values)
	}
	e.u32(uint32(a.Type))
	e.u64(uint64(a.Len()))
	switch x := a.Values.(type) {
	case []Array:
		for _, sub := range x {
			if err := e.array(sub, depth+1); err != nil {
				return err
			}
		}
	case []string:
		for _, s := range x {
			e.str(s)
		}
	case []uint8:
		e.b.Write(x)
	default:
		return eachScalar(a, func(v any) error { return e.payload(v, depth) })
	}
	return nil
}

func eachScalar(a Array, fn func(any) error) error {
	switch x := a.Values.(type) {
	case []int8:
		return each(x, fn)
	case []uint16:
		return each(x, fn)
	case []int16:
		return each(x, fn)
	case []uint32:
		return each(x, fn)
	case []int32:
		return each(x, fn)
	case []uint64:
		return each(x, fn)
	case []int64:
		return each(x, fn)
	case []float32:
		return each(x, fn)
	case []float64:
		return each(x, fn)
	case []bool:
		return each(x, fn)
	}
	return fmt.Errorf("unsupported array %T", a.Values)
}

func each[T any](xs []T, fn func(any) error) error {
	for _, x := range xs {
		if err := fn(x); err != nil {
			return err
		}
	}
	return nil
}
