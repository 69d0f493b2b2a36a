package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/visorhq/visor/internal/safefile"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// Limits that keep a corrupt or hostile header from allocating much more memory than the bytes it really holds.
// They are far above anything a real model uses (the largest vocabularies have ~260K tokens; chat templates are
// tens of KB; the biggest MoE files have ~50K tensors).
const (
	maxStringLen   = 64 << 20
	maxArrayLen    = 1 << 30
	maxKVCount     = 1 << 20
	maxTensorCount = 1 << 24
	maxNesting     = 8
	// Slices are grown as elements really arrive, never pre-sized beyond this from a length read off the file.
	maxPrealloc = 1 << 12
)

// ErrFormat is wrapped by every error about malformed GGUF content (as opposed to I/O errors).
var ErrFormat = errors.New("malformed GGUF")

// File is a parsed GGUF header: metadata, tensor table and where the tensor data starts. It holds no tensor data.
type File struct {
	// Name identifies the source in messages (the path for Open).
	Name    string
	Version uint32
	// KV is the metadata in file order.
	KV      []KV
	Tensors []TensorInfo
	// Alignment is general.alignment, or DefaultAlignment.
	Alignment uint64
	// DataOffset is the absolute file offset of the data section (header end padded to Alignment).
	DataOffset uint64

	index map[string]int
}

// KV is one metadata entry. Value is one of uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32,
// float64, bool, string or Array.
type KV struct {
	Key   string
	Value any
}

// Array is a metadata array. Values is a typed slice matching Type: []uint8, []int8, []uint16, []int16, []uint32,
// []int32, []uint64, []int64, []float32, []float64, []bool, []string, or []Array for nested arrays.
type Array struct {
	Type   ValueType
	Values any
}

// Len returns the number of elements.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float32:
		return len(v)
	case []float64:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// Open parses the header of the GGUF file at path. Only the header is read (through a buffer), so multi-GB models
// open in milliseconds; tensors are checked to lie inside the file. Only a regular file is opened: a FIFO or a
// device is refused (safefile.ErrNotRegular) instead of blocking or reading without end.
func Open(path string) (*File, error) {
	f, st, err := safefile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	return ReadAt(f, st.Size(), path)
}

// ReadAt parses the header of a GGUF image of the given size. Unlike Read it can check that lengths and tensors fit
// in the image, so truncated files are reported as such.
func ReadAt(r io.ReaderAt, size int64, name string) (*File, error) {
	return parse(io.NewSectionReader(r, 0, size), size, name)
}

// Read parses a GGUF header from a stream, reading no further than the end of the tensor table. The stream's size
// is unknown, so tensor extents are not checked against it.
func Read(r io.Reader, name string) (*File, error) {
	return parse(r, -1, name)
}

type decoder struct {
	r    *bufio.Reader
	pos  int64
	size int64 // -1 when unknown
	name string
	buf  [8]byte
	// scratch holds short strings while they are read, so each costs one allocation (the string itself).
	scratch []byte
}

func parse(r io.Reader, size int64, name string) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10), size: size, name: name}
	f, err := d.file()
	if err != nil {
		return nil, err
	}
	return f, nil
}

// errorf reports malformed content at the current position.
func (d *decoder) errorf(format string, args ...any) error {
	return fmt.Errorf("gguf %s: at byte %d: %s: %w", d.name, d.pos, fmt.Sprintf(format, args...), ErrFormat)
}

func (d *decoder) read(n int) ([]byte, error) {
	b := d.buf[:n]
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, d.ioErr(err)
	}
	d.pos += int64(n)
	return b, nil
}

func (d *decoder) ioErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("gguf %s: truncated at byte %d (file ends inside the header; re-download or re-convert it): %w",
			d.name, d.pos, ErrFormat)
	}
	return fmt.Errorf("gguf %s: read at byte %d: %w", d.name, d.pos, err)
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// remaining reports whether n more bytes can exist; with an unknown size it always can.
func (d *decoder) fits(n uint64) bool {
	return d.size < 0 || n <= uint64(d.size-d.pos)
}

// str reads a length-prefixed string. what names it in errors and is only formatted when one occurs: vocabularies
// hold hundreds of thousands of strings.
func (d *decoder) str(what func() string) (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	if n > maxStringLen {
		return "", d.errorf("%s: string length %d exceeds the %d-byte limit", what(), n, maxStringLen)
	}
	if !d.fits(n) {
		return "", d.errorf("%s: string length %d runs past the end of the file (%d bytes)", what(), n, d.size)
	}
	if n <= 64<<10 {
		if uint64(cap(d.scratch)) < n {
			d.scratch = make([]byte, max(n, 256))
		}
		b := d.scratch[:n]
		if _, err := io.ReadFull(d.r, b); err != nil {
			return "", d.ioErr(err)
		}
		d.pos += int64(n)
		return string(b), nil
	}
	// Read long strings in chunks so a stream that claims 64 MiB but ends early costs only what it delivered.
	var out []byte
	for rem := int(n); rem > 0; {
		c := min(rem, 64<<10)
		start := len(out)
		out = append(out, make([]byte, c)...)
		if _, err := io.ReadFull(d.r, out[start:]); err != nil {
			return "", d.ioErr(err)
		}
		d.pos += int64(c)
		rem -= c
	}
	return string(out), nil
}

func (d *decoder) file() (*File, error) {
	b, err := d.read(4)
	if err != nil {
		return nil, err
	}
	if string(b) != Magic {
		return nil, d.errorf("bad magic %q, want %q (not a GGUF file; old GGML/GGJT files must be converted)", b, Magic)
	}
	ver, err := d.u32()
	if err != nil {
		return nil, err
	}
	switch {
	case ver == 2 || ver == 3:
	case ver == 1:
		return nil, d.errorf("GGUF version 1 is not supported (re-convert with a current llama.cpp)")
	case ver&0xFFFF == 0 && ver != 0:
		return nil, d.errorf("big-endian GGUF (version word %#x) is not supported", ver)
	default:
		return nil, d.errorf("unsupported GGUF version %d (want 2 or 3)", ver)
	}
	nt, err := d.u64()
	if err != nil {
		return nil, err
	}
	nkv, err := d.u64()
	if err != nil {
		return nil, err
	}
	if nt > maxTensorCount {
		return nil, d.errorf("tensor count %d exceeds the limit %d", nt, maxTensorCount)
	}
	if nkv > maxKVCount {
		return nil, d.errorf("metadata count %d exceeds the limit %d", nkv, maxKVCount)
	}
	f := &File{Name: d.name, Version: ver, Alignment: DefaultAlignment, index: make(map[string]int, min(nkv, maxPrealloc))}
	f.KV = make([]KV, 0, min(nkv, maxPrealloc))
	for i := uint64(0); i < nkv; i++ {
		key, err := d.str(func() string { return fmt.Sprintf("key of metadata entry %d", i) })
		if err != nil {
			return nil, err
		}
		if _, dup := f.index[key]; dup {
			return nil, d.errorf("duplicate metadata key %q", key)
		}
		vt, err := d.u32()
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(vt), key, 0)
		if err != nil {
			return nil, err
		}
		f.index[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, d.errorf("general.alignment must be a non-zero power of two uint32, got %v (%T)", v, v)
		}
		f.Alignment = uint64(a)
	}

	f.Tensors = make([]TensorInfo, 0, min(nt, maxPrealloc))
	names := make(map[string]bool, min(nt, maxPrealloc))
	for i := uint64(0); i < nt; i++ {
		t, err := d.tensor(i)
		if err != nil {
			return nil, err
		}
		if names[t.Name] {
			return nil, d.errorf("duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		if t.Offset%f.Alignment != 0 {
			return nil, d.errorf("tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(uint64(d.pos), f.Alignment)
	if d.size >= 0 {
		for _, t := range f.Tensors {
			end := f.DataOffset + t.Offset + t.Bytes()
			if end < t.Offset || end > uint64(d.size) {
				return nil, fmt.Errorf("gguf %s: tensor %q (%d bytes at data offset %d) ends at byte %d, past the end of the file (%d bytes): truncated download? %w",
					d.name, t.Name, t.Bytes(), t.Offset, end, d.size, ErrFormat)
			}
		}
	}
	return f, nil
}

func (d *decoder) tensor(i uint64) (TensorInfo, error) {
	name, err := d.str(func() string { return fmt.Sprintf("name of tensor %d", i) })
	if err != nil {
		return TensorInfo{}, err
	}
	nd, err := d.u32()
	if err != nil {
		return TensorInfo{}, err
	}
	if nd > maxDims {
		return TensorInfo{}, d.errorf("tensor %q: %d dimensions (ggml allows %d)", name, nd, maxDims)
	}
	t := TensorInfo{Name: name, Shape: make([]uint64, nd)}
	for j := range t.Shape {
		if t.Shape[j], err = d.u64(); err != nil {
			return TensorInfo{}, err
		}
	}
	ty, err := d.u32()
	if err != nil {
		return TensorInfo{}, err
	}
	t.Type = Type(ty)
	if err := checkShape(t.Shape, t.Type); err != nil {
		return TensorInfo{}, d.errorf("tensor %q: %v", name, err)
	}
	if t.Offset, err = d.u64(); err != nil {
		return TensorInfo{}, err
	}
	if t.Offset > 1<<62 {
		return TensorInfo{}, d.errorf("tensor %q: absurd data offset %d", name, t.Offset)
	}
	return t, nil
}

func (d *decoder) value(vt ValueType, key string, depth int) (any, error) {
	switch vt {
	case String:
		return d.str(func() string { return fmt.Sprintf("value of %q", key) })
	case ArrayT:
		return d.array(key, depth)
	}
	n := vt.size()
	if n == 0 {
		return nil, d.errorf("metadata %q: unknown value type %d", key, uint32(vt))
	}
	b, err := d.read(n)
	if err != nil {
		return nil, err
	}
	v, err := scalar(vt, b)
	if err != nil {
		return nil, d.errorf("metadata %q: %v", key, err)
	}
	return v, nil
}

func scalar(vt ValueType, b []byte) (any, error) {
	le := binary.LittleEndian
	switch vt {
	case Uint8:
		return b[0], nil
	case Int8:
		return int8(b[0]), nil
	case Bool:
		if b[0] > 1 {
			return nil, fmt.Errorf("bool byte %d is neither 0 nor 1", b[0])
		}
		return b[0] == 1, nil
	case Uint16:
		return le.Uint16(b), nil
	case Int16:
		return int16(le.Uint16(b)), nil
	case Uint32:
		return le.Uint32(b), nil
	case Int32:
		return int32(le.Uint32(b)), nil
	case Float32:
		return math.Float32frombits(le.Uint32(b)), nil
	case Uint64:
		return le.Uint64(b), nil
	case Int64:
		return int64(le.Uint64(b)), nil
	case Float64:
		return math.Float64frombits(le.Uint64(b)), nil
	}
	return nil, fmt.Errorf("value type %v is not a scalar", vt)
}

func (d *decoder) array(key string, depth int) (any, error) {
	if depth >= maxNesting {
		return nil, d.errorf("metadata %q: arrays nested deeper than %d", key, maxNesting)
	}
	et, err := d.u32()
	if err != nil {
		return nil, err
	}
	n, err := d.u64()
	if err != nil {
		return nil, err
	}
	vt := ValueType(et)
	if n > maxArrayLen {
		return nil, d.errorf("metadata %q: array length %d exceeds the limit %d", key, n, maxArrayLen)
	}
	if vt != String && vt != ArrayT && vt.size() == 0 {
		return nil, d.errorf("metadata %q: unknown array element type %d", key, et)
	}
	// Every element takes at least one byte (strings 8, arrays 12), so a known size bounds the count.
	minElem := uint64(max(vt.size(), 1))
	switch vt {
	case String:
		minElem = 8
	case ArrayT:
		minElem = 12
	}
	if !d.fits(n * minElem) {
		return nil, d.errorf("metadata %q: %d-element %v array runs past the end of the file (%d bytes)", key, n, vt, d.size)
	}
	// With a known size the count was just checked against the bytes that remain, so sizing the slice up front
	// costs at most a small multiple of the file; a stream only gets a bounded first guess.
	prealloc := min(n, maxPrealloc)
	if d.size >= 0 {
		prealloc = n
	}
	switch vt {
	case String:
		out := make([]string, 0, prealloc)
		for i := uint64(0); i < n; i++ {
			s, err := d.str(func() string { return fmt.Sprintf("element %d of %q", i, key) })
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return Array{Type: String, Values: out}, nil
	case ArrayT:
		out := make([]Array, 0, prealloc)
		for i := uint64(0); i < n; i++ {
			v, err := d.array(key, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v.(Array))
		}
		return Array{Type: ArrayT, Values: out}, nil
	}
	if vt.size() == 0 {
		return nil, d.errorf("metadata %q: unknown array element type %d", key, et)
	}
	return d.scalars(vt, n, key)
}

// scalars reads n fixed-size elements into a typed slice, in bulk and without boxing each element: vocabularies
// carry several 250K-element arrays.
func (d *decoder) scalars(vt ValueType, n uint64, key string) (any, error) {
	le := binary.LittleEndian
	switch vt {
	case Uint8:
		return readN(d, vt, n, key, func(b []byte) (uint8, bool) { return b[0], true })
	case Int8:
		return readN(d, vt, n, key, func(b []byte) (int8, bool) { return int8(b[0]), true })
	case Bool:
		return readN(d, vt, n, key, func(b []byte) (bool, bool) { return b[0] == 1, b[0] <= 1 })
	case Uint16:
		return readN(d, vt, n, key, func(b []byte) (uint16, bool) { return le.Uint16(b), true })
	case Int16:
		return readN(d, vt, n, key, func(b []byte) (int16, bool) { return int16(le.Uint16(b)), true })
	case Uint32:
		return readN(d, vt, n, key, func(b []byte) (uint32, bool) { return le.Uint32(b), true })
	case Int32:
		return readN(d, vt, n, key, func(b []byte) (int32, bool) { return int32(le.Uint32(b)), true })
	case Float32:
		return readN(d, vt, n, key, func(b []byte) (float32, bool) { return math.Float32frombits(le.Uint32(b)), true })
	case Uint64:
		return readN(d, vt, n, key, func(b []byte) (uint64, bool) { return le.Uint64(b), true })
	case Int64:
		return readN(d, vt, n, key, func(b []byte) (int64, bool) { return int64(le.Uint64(b)), true })
	case Float64:
		return readN(d, vt, n, key, func(b []byte) (float64, bool) { return math.Float64frombits(le.Uint64(b)), true })
	}
	return nil, d.errorf("metadata %q: unknown array element type %d", key, uint32(vt))
}

func readN[T any](d *decoder, vt ValueType, n uint64, key string, conv func([]byte) (T, bool)) (Array, error) {
	sz := vt.size()
	c0 := min(n, maxPrealloc)
	if d.size >= 0 {
		c0 = n // checked against the remaining bytes by the caller
	}
	out := make([]T, 0, c0)
	chunk := make([]byte, sz*int(min(n, maxPrealloc)))
	for n > 0 {
		c := int(min(n, maxPrealloc))
		b := chunk[:c*sz]
		if _, err := io.ReadFull(d.r, b); err != nil {
			return Array{}, d.ioErr(err)
		}
		for i := 0; i < c; i++ {
			v, ok := conv(b[i*sz : (i+1)*sz])
			if !ok {
				return Array{}, d.errorf("metadata %q element %d: invalid %v", key, len(out), vt)
			}
			out = append(out, v)
		}
		d.pos += int64(len(b))
		n -= uint64(c)
	}
	return Array{Type: vt, Values: out}, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }
