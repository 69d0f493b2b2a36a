package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// storiesPath is the real trained model the repository ships (testdata/models/README.md).
const storiesPath = "../../testdata/models/stories260K.gguf"

// allValues covers every scalar type, every array element type, nesting and empty values.
func allValues() []KV {
	return []KV{
		{"general.architecture", "llama"},
		{"u8", uint8(200)},
		{"i8", int8(-100)},
		{"u16", uint16(60000)},
		{"i16", int16(-30000)},
		{"u32", uint32(4_000_000_000)},
		{"i32", int32(-2_000_000_000)},
		{"u64", uint64(math.MaxUint64)},
		{"i64", int64(math.MinInt64)},
		{"f32", float32(3.25)},
		{"f64", math.Pi},
		{"t", true},
		{"f", false},
		{"s", "héllo\x00world"},
		{"empty", ""},
		{"a.u8", Array{Uint8, []uint8{1, 2, 255}}},
		{"a.i8", Array{Int8, []int8{-1, 0, 1}}},
		{"a.u16", Array{Uint16, []uint16{1, 65535}}},
		{"a.i16", Array{Int16, []int16{-32768, 32767}}},
		{"a.u32", Array{Uint32, []uint32{7, 8}}},
		{"a.i32", Array{Int32, []int32{-7, 8}}},
		{"a.u64", Array{Uint64, []uint64{1 << 63}}},
		{"a.i64", Array{Int64, []int64{-1 << 40}}},
		{"a.f32", Array{Float32, []float32{0.5, -1}}},
		{"a.f64", Array{Float64, []float64{1e300}}},
		{"a.bool", Array{Bool, []bool{true, false, true}}},
		{"a.str", Array{String, []string{"a", "", "ccc"}}},
		{"a.empty", Array{Int32, []int32{}}},
		{"a.nested", Array{ArrayT, []Array{
			{Int32, []int32{1, 2}},
			{String, []string{"x"}},
			{ArrayT, []Array{{Bool, []bool{true}}}},
		}}},
	}
}

func smallTensors() []Tensor {
	data := make([]byte, 4*8*2)
	for i := range data {
		data[i] = byte(i)
	}
	return []Tensor{
		{Name: "a", Shape: []uint64{8, 2}, Type: TypeF32, Data: data},
		{Name: "q", Shape: []uint64{64, 3}, Type: TypeQ4_0}, // zeros
		{Name: "s", Shape: []uint64{}, Type: TypeF16, Data: []byte{1, 2}},
		{Name: "k", Shape: []uint64{256, 1, 1, 2}, Type: TypeQ4_K},
	}
}

func encode(t testing.TB, kv []KV, ts []Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := Write(&buf, kv, ts)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("Write reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTripAllValueTypes(t *testing.T) {
	t.Parallel()
	kv := allValues()
	ts := smallTensors()
	b := encode(t, kv, ts)
	if b2 := encode(t, kv, ts); !bytes.Equal(b, b2) {
		t.Fatal("two writes of the same input differ")
	}
	for name, read := range map[string]func() (*File, error){
		"ReadAt": func() (*File, error) { return ReadAt(bytes.NewReader(b), int64(len(b)), "mem") },
		"Read":   func() (*File, error) { return Read(bytes.NewReader(b), "mem") },
	} {
		f, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Version != 3 || f.Alignment != DefaultAlignment {
			t.Errorf("%s: version %d alignment %d", name, f.Version, f.Alignment)
		}
		if !reflect.DeepEqual(f.KV, kv) {
			t.Errorf("%s: metadata differs:\n got %#v\nwant %#v", name, f.KV, kv)
		}
		if len(f.Tensors) != len(ts) {
			t.Fatalf("%s: %d tensors, want %d", name, len(f.Tensors), len(ts))
		}
		for i, ti := range f.Tensors {
			want := ts[i]
			if ti.Name != want.Name || ti.Type != want.Type || !reflect.DeepEqual(ti.Shape, want.Shape) {
				t.Errorf("%s: tensor %d = %+v, want %+v", name, i, ti, want)
			}
			if ti.Offset%f.Alignment != 0 {
				t.Errorf("%s: tensor %s offset %d not aligned", name, ti.Name, ti.Offset)
			}
			start := f.DataOffset + ti.Offset
			got := b[start : start+ti.Bytes()]
			if want.Data != nil && !bytes.Equal(got, want.Data) {
				t.Errorf("%s: tensor %s data %v, want %v", name, ti.Name, got, want.Data)
			}
			if want.Data == nil && bytes.Count(got, []byte{0}) != len(got) {
				t.Errorf("%s: tensor %s should be zeros", name, ti.Name)
			}
		}
	}
	if uint64(len(b))%DefaultAlignment != 0 {
		t.Errorf("file size %d is not padded to the alignment", len(b))
	}
}

func TestTypedSlicesAndAccessors(t *testing.T) {
	t.Parallel()
	kv := []KV{
		{"general.architecture", "qwen35moe"},
		{"general.alignment", uint32(64)},
		{"qwen35moe.block_count", uint32(41)},
		{"qwen35moe.attention.head_count_kv", []int32{0, 0, 0, 2}},
		{"neg", int32(-5)},
		{"tokens", []string{"a", "b"}},
		{"flag", true},
		{"ratio", float32(0.5)},
	}
	b := encode(t, kv, []Tensor{{Name: "x", Shape: []uint64{3}, Type: TypeF32}, {Name: "y", Shape: []uint64{1}, Type: TypeI8}})
	f, err := ReadAt(bytes.NewReader(b), int64(len(b)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if f.Arch() != "qwen35moe" || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("arch %q alignment %d data offset %d", f.Arch(), f.Alignment, f.DataOffset)
	}
	if y, _ := f.Tensor("y"); y.Offset != 64 {
		t.Errorf("second tensor at %d, want 64 (12 bytes padded to 64)", y.Offset)
	}
	if n, ok := f.Uint("qwen35moe.block_count"); !ok || n != 41 {
		t.Errorf("Uint = %d %v", n, ok)
	}
	if _, ok := f.Uint("neg"); ok {
		t.Error("Uint of a negative value must report false")
	}
	if n, ok := f.Int("neg"); !ok || n != -5 {
		t.Errorf("Int = %d %v", n, ok)
	}
	if v, ok := f.Ints("qwen35moe.attention.head_count_kv"); !ok || !reflect.DeepEqual(v, []int64{0, 0, 0, 2}) {
		t.Errorf("Ints(array) = %v %v", v, ok)
	}
	if v, ok := f.Ints("qwen35moe.block_count"); !ok || !reflect.DeepEqual(v, []int64{41}) {
		t.Errorf("Ints(scalar) = %v %v", v, ok)
	}
	if s, ok := f.Strings("tokens"); !ok || len(s) != 2 {
		t.Errorf("Strings = %v %v", s, ok)
	}
	if v, ok := f.Float("ratio"); !ok || v != 0.5 {
		t.Errorf("Float = %v %v", v, ok)
	}
	if v, ok := f.Bool("flag"); !ok || !v {
		t.Errorf("Bool = %v %v", v, ok)
	}
	if _, ok := f.String("qwen35moe.block_count"); ok {
		t.Error("String of a uint32 must report false")
	}
	if _, ok := f.Get("missing"); ok {
		t.Error("missing key found")
	}
}

func TestStories260K(t *testing.T) {
	t.Parallel()
	f, err := Open(storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	if f.Arch() != "llama" {
		t.Errorf("arch %q", f.Arch())
	}
	for key, want := range map[string]uint64{"llama.block_count": 5, "llama.embedding_length": 64,
		"llama.context_length": 2048, "llama.attention.head_count": 8, "llama.attention.head_count_kv": 4} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s = %d (%v), want %d", key, got, ok, want)
		}
	}
	toks, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(toks) != 512 || toks[1] != "<s>" {
		t.Errorf("vocab: %d tokens, ok=%v", len(toks), ok)
	}
	st, _ := os.Stat(storiesPath)
	if got := f.DataOffset + f.TensorBytes(); got != uint64(st.Size()) {
		t.Errorf("data offset %d + tensor bytes %d = %d, file is %d", f.DataOffset, f.TensorBytes(), got, st.Size())
	}
	if len(f.Tensors) != 3+5*9 {
		t.Errorf("%d tensors", len(f.Tensors))
	}
	// The header must stream: reading from a plain io.Reader gives the same result.
	fh, _ := os.Open(storiesPath)
	defer fh.Close()
	g, err := Read(fh, storiesPath)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Tensors, f.Tensors) || g.DataOffset != f.DataOffset {
		t.Error("Read and Open disagree")
	}
}

// TestEveryPrefixFails cuts a small file at every length: each prefix must give a format error, never a panic.
func TestEveryPrefixFails(t *testing.T) {
	t.Parallel()
	b := encode(t, allValues(), smallTensors())
	f, err := ReadAt(bytes.NewReader(b), int64(len(b)), "full")
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		p := b[:n]
		_, err := ReadAt(bytes.NewReader(p), int64(n), "cut.gguf")
		if err == nil {
			// Cutting inside the padding after the last tensor leaves every tensor whole: that is a valid file.
			last := f.Tensors[len(f.Tensors)-1]
			if uint64(n) >= f.DataOffset+last.Offset+last.Bytes() {
				continue
			}
			t.Fatalf("prefix of %d bytes parsed without error", n)
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "cut.gguf") {
			t.Fatalf("prefix %d: error %q should wrap ErrFormat and name the file", n, err)
		}
	}
	// A stream is read only up to the end of the tensor table, which lies within the alignment before DataOffset.
	for n := 0; n < len(b); n++ {
		_, err := Read(bytes.NewReader(b[:n]), "cut.gguf")
		if tableEnd := f.DataOffset - f.Alignment; err == nil && uint64(n) <= tableEnd {
			t.Fatalf("stream prefix of %d bytes (table ends after %d): %v", n, tableEnd, err)
		}
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("stream prefix %d: %v does not wrap ErrFormat", n, err)
		}
	}
}

func header(version uint32, nt, nkv uint64) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nt)
	return binary.LittleEndian.AppendUint64(b, nkv)
}

func TestCorruptInput(t *testing.T) {
	t.Parallel()
	le := binary.LittleEndian
	kvStr := func(key string) []byte {
		b := le.AppendUint64(nil, uint64(len(key)))
		return append(b, key...)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"magic", []byte("GGML\x03\x00\x00\x00"), "bad magic"},
		{"v1", header(1, 0, 0), "version 1"},
		{"bigendian", []byte("GGUF\x00\x00\x00\x03"), "big-endian"},
		{"v9", header(9, 0, 0), "unsupported GGUF version 9"},
		{"tensors", header(3, 1<<40, 0), "tensor count"},
		{"kvs", header(3, 0, 1<<40), "metadata count"},
		{"keylen", le.AppendUint64(header(3, 0, 1), 1<<40), "string length"},
		{"keylen-past-eof", le.AppendUint64(header(3, 0, 1), 1000), "past the end"},
		{"valuetype", le.AppendUint32(append(header(3, 0, 1), kvStr("k")...), 99), "unknown value type 99"},
		{"arraylen", le.AppendUint64(le.AppendUint32(le.AppendUint32(append(header(3, 0, 1), kvStr("k")...), 9), 4), 1<<29), "past the end"},
		{"arraytype", le.AppendUint64(le.AppendUint32(le.AppendUint32(append(header(3, 0, 1), kvStr("k")...), 9), 77), 1), "unknown array element type"},
		{"bool", append(le.AppendUint32(append(header(3, 0, 1), kvStr("k")...), 7), 5), "neither 0 nor 1"},
		{"dims", le.AppendUint32(append(header(3, 1, 0), kvStr("t")...), 5), "5 dimensions"},
		{"ggmltype", le.AppendUint32(le.AppendUint64(le.AppendUint32(append(header(3, 1, 0), kvStr("t")...), 1), 4), 4), "unknown ggml type 4"},
		{"blocks", le.AppendUint32(le.AppendUint64(le.AppendUint32(append(header(3, 1, 0), kvStr("t")...), 1), 33), 2), "block size"},
		{"overflow", le.AppendUint32(le.AppendUint64(le.AppendUint64(le.AppendUint32(append(header(3, 1, 0), kvStr("t")...), 2), 1<<40), 1<<40), 0), "overflows"},
	}
	for _, c := range cases {
		_, err := ReadAt(bytes.NewReader(c.data), int64(len(c.data)), "bad.gguf")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "bad.gguf") {
			t.Errorf("%s: error %v, want one naming bad.gguf and containing %q", c.name, err, c.want)
		}
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v does not wrap ErrFormat", c.name, err)
		}
	}
}

func TestCorruptTable(t *testing.T) {
	t.Parallel()
	mk := func(kv []KV, ts []Tensor) []byte { return encode(t, kv, ts) }
	// A duplicate key, a misaligned offset and a bad alignment can only come from another writer: patch bytes.
	b := mk([]KV{{"aa", uint8(1)}, {"ab", uint8(2)}}, nil)
	b = bytes.Replace(b, []byte("ab"), []byte("aa"), 1)
	if _, err := ReadAt(bytes.NewReader(b), int64(len(b)), "dup"); err == nil || !strings.Contains(err.Error(), "duplicate metadata key") {
		t.Errorf("duplicate key: %v", err)
	}
	b = mk([]KV{{"general.alignment", uint32(32)}}, nil)
	i := bytes.Index(b, []byte("general.alignment")) + len("general.alignment") + 4
	binary.LittleEndian.PutUint32(b[i:], 48)
	if _, err := ReadAt(bytes.NewReader(b), int64(len(b)), "align"); err == nil || !strings.Contains(err.Error(), "power of two") {
		t.Errorf("bad alignment: %v", err)
	}
	b = mk(nil, []Tensor{{Name: "t", Shape: []uint64{8}, Type: TypeF32}})
	i = bytes.Index(b, []byte("t")) + 1 + 4 + 8 + 4
	binary.LittleEndian.PutUint64(b[i:], 3)
	if _, err := ReadAt(bytes.NewReader(b), int64(len(b)), "off"); err == nil || !strings.Contains(err.Error(), "not a multiple of the alignment") {
		t.Errorf("misaligned offset: %v", err)
	}
}

func TestWriterRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kv   []KV
		ts   []Tensor
		want string
	}{
		{[]KV{{"k", 1}}, nil, "not int"},
		{[]KV{{"k", uint8(1)}, {"k", uint8(2)}}, nil, "duplicate metadata key"},
		{[]KV{{"general.alignment", uint32(3)}}, nil, "power-of-two"},
		{[]KV{{"k", Array{Int32, []string{"x"}}}}, nil, "element type"},
		{nil, []Tensor{{Name: "t", Shape: []uint64{8}, Type: TypeF32, Data: []byte{1}}}, "needs 32"},
		{nil, []Tensor{{Name: strings.Repeat("n", 64), Shape: []uint64{1}, Type: TypeF32}}, "limit"},
		{nil, []Tensor{{Name: "t", Shape: []uint64{16}, Type: TypeQ4_0}}, "block size"},
		{nil, []Tensor{{Name: "t", Shape: []uint64{1}, Type: TypeF32}, {Name: "t", Shape: []uint64{1}, Type: TypeF32}}, "duplicate tensor"},
	}
	for _, c := range cases {
		if _, err := Write(&bytes.Buffer{}, c.kv, c.ts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Write(%v, %v) error %v, want %q", c.kv, c.ts, err, c.want)
		}
	}
}

// TestWriteFileSparse writes a 20 GB header-only model: it must take no disk space (the holes are what make it
// quick; a clock would only measure the machine) and read back.
func TestWriteFileSparse(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "big.gguf")
	ts := []Tensor{
		{Name: "token_embd.weight", Shape: []uint64{4096, 248320}, Type: TypeQ4_K},
		{Name: "blk.0.ffn_up_exps.weight", Shape: []uint64{4096, 8192, 256}, Type: TypeQ4_0}, // 18.1 GB
		{Name: "small", Shape: []uint64{4}, Type: TypeF32, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
	}
	if err := WriteFile(path, []KV{{"general.architecture", "llama"}}, ts); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if want := alignUp(f.DataOffset+f.Tensors[2].Offset+16, 32); uint64(st.Size()) != want {
		t.Errorf("file size %d, want %d", st.Size(), want)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Blocks*512 > 1<<20 {
		t.Errorf("file uses %d bytes of disk: not sparse", sys.Blocks*512)
	}
	got := make([]byte, 16)
	fh, _ := os.Open(path)
	defer fh.Close()
	if _, err := fh.ReadAt(got, int64(f.DataOffset+f.Tensors[2].Offset)); err != nil || got[15] != 16 {
		t.Errorf("tensor data read back %v %v", got, err)
	}
	var buf bytes.Buffer
	small := ts[2:]
	if _, err := Write(&buf, []KV{{"general.architecture", "llama"}}, small); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []KV{{"general.architecture", "llama"}}, small); err != nil {
		t.Fatal(err)
	}
	if disk, _ := os.ReadFile(path); !bytes.Equal(disk, buf.Bytes()) {
		t.Error("WriteFile and Write produce different bytes")
	}
}

func TestTypeSizes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t         Type
		shape     []uint64
		bytes     uint64
		name      string
		blk, size uint64
	}{
		{TypeF32, []uint64{64, 512}, 131072, "f32", 1, 4},
		{TypeBF16, []uint64{1152, 4304}, 1152 * 4304 * 2, "bf16", 1, 2},
		{TypeQ4_0, []uint64{4096, 10}, 4096 / 32 * 18 * 10, "q4_0", 32, 18},
		{TypeQ8_0, []uint64{32}, 34, "q8_0", 32, 34},
		{TypeQ4_K, []uint64{2048, 512, 256}, 2048 / 256 * 144 * 512 * 256, "q4_K", 256, 144},
		{TypeQ6_K, []uint64{256}, 210, "q6_K", 256, 210},
		{TypeIQ4_XS, []uint64{256, 2}, 272, "iq4_xs", 256, 136},
		{TypeMXFP4, []uint64{2880, 2880}, 2880 / 32 * 17 * 2880, "mxfp4", 32, 17},
		{TypeTQ1_0, []uint64{256}, 54, "tq1_0", 256, 54},
	} {
		ti := TensorInfo{Shape: c.shape, Type: c.t}
		if ti.Bytes() != c.bytes || c.t.String() != c.name || c.t.BlockSize() != c.blk || c.t.TypeSize() != c.size {
			t.Errorf("%s: bytes %d name %s block %d size %d", c.name, ti.Bytes(), c.t, c.t.BlockSize(), c.t.TypeSize())
		}
		if p, err := ParseType(strings.ToUpper(c.name)); err != nil || p != c.t {
			t.Errorf("ParseType(%s) = %v, %v", c.name, p, err)
		}
	}
	if Type(4).Valid() || Type(31).Valid() || Type(4).String() != "type(4)" {
		t.Error("retired ids must be invalid")
	}
	if _, err := ParseType("q9_9"); err == nil {
		t.Error("ParseType accepted q9_9")
	}
}

func TestOpenMissing(t *testing.T) {
	t.Parallel()
	_, err := Open(filepath.Join(t.TempDir(), "nope.gguf"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.gguf") {
		t.Errorf("error %v", err)
	}
}

// TestGetAfterEdit: KV is exported, so a parsed File may be edited; lookups must follow the edit rather than a
// stale index (which returned another key's value, or indexed past the end after a delete).
func TestGetAfterEdit(t *testing.T) {
	t.Parallel()
	kv := []KV{{"general.architecture", "llama"}, {"a", uint32(1)}, {"b", uint32(2)}}
	b := encode(t, kv, nil)
	f, err := ReadAt(bytes.NewReader(b), int64(len(b)), "mem")
	if err != nil {
		t.Fatal(err)
	}
	f.KV = f.KV[2:] // drop general.architecture and a: b moves from position 2 to 0
	if v, ok := f.Get("b"); !ok || v != uint32(2) {
		t.Errorf("Get(b) after delete = %v %v, want 2 true", v, ok)
	}
	if v, ok := f.Get("a"); ok {
		t.Errorf("Get(a) after delete = %v, want missing", v)
	}
	f.KV = append(f.KV, KV{"c", uint32(3)})
	if v, ok := f.Get("c"); !ok || v != uint32(3) {
		t.Errorf("Get(c) after append = %v %v, want 3 true", v, ok)
	}
}

// TestGetHandBuiltConcurrently: reading a hand-built File from several goroutines must not write to it (run with
// -race).
func TestGetHandBuiltConcurrently(t *testing.T) {
	t.Parallel()
	f := &File{KV: []KV{{"general.architecture", "llama"}}}
	done := make(chan string)
	for range 4 {
		go func() { done <- f.Arch() }()
	}
	for range 4 {
		if a := <-done; a != "llama" {
			t.Errorf("Arch = %q, want llama", a)
		}
	}
	f.KV = append(f.KV, KV{"x", true})
	if v, ok := f.Bool("x"); !ok || !v {
		t.Errorf("Bool(x) after append = %v %v", v, ok)
	}
}
