package gguf

import "math"

// Get returns the value of a metadata key.
func (f *File) Get(key string) (any, bool) {
	// The parser's index is only a hint: KV is exported and may have been edited since, so an entry counts only
	// while it still names key. A hand-built File (no index) is searched rather than indexed here, because
	// building the index would be a write racing with concurrent readers.
	if i, ok := f.index[key]; ok && i < len(f.KV) && f.KV[i].Key == key {
		return f.KV[i].Value, true
	}
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// Arch returns general.architecture ("llama", "qwen35moe", "clip"), or "" when absent.
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Get(key)
	s, isStr := v.(string)
	return s, ok && isStr
}

// Uint returns an integer value of any width as uint64; negative values and non-integers report false.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	i, isInt := asInt(v)
	if !isInt || i < 0 {
		if u, isU64 := v.(uint64); isU64 {
			return u, true
		}
		return 0, false
	}
	return uint64(i), true
}

// Int returns an integer value of any width as int64 (uint64 values above MaxInt64 report false).
func (f *File) Int(key string) (int64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	return asInt(v)
}

// Float returns a float or integer value as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Get(key)
	switch x := v.(type) {
	case float32:
		return float64(x), ok
	case float64:
		return x, ok
	}
	i, isInt := asInt(v)
	return float64(i), ok && isInt
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Get(key)
	b, isBool := v.(bool)
	return b, ok && isBool
}

// Array returns an array value. A typed slice ([]int32, []string …) in a hand-built File counts as an array, as
// it does for the writer.
func (f *File) Array(key string) (Array, bool) {
	v, ok := f.Get(key)
	if !ok {
		return Array{}, false
	}
	if a, isArr := v.(Array); isArr {
		return a, true
	}
	a, err := arrayOf(v)
	return a, err == nil
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	a, ok := f.Array(key)
	s, isStr := a.Values.([]string)
	return s, ok && isStr
}

// Ints returns an integer array of any element width, or a scalar integer as a one-element slice. llama.cpp accepts
// both for per-layer hyperparameters such as head_count_kv, so callers should too.
func (f *File) Ints(key string) ([]int64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return nil, false
	}
	if i, isInt := asInt(v); isInt {
		return []int64{i}, true
	}
	a, isArr := f.Array(key)
	if !isArr {
		return nil, false
	}
	return a.Ints()
}

// Ints converts an integer array to []int64; false for other element types or uint64 values above MaxInt64.
func (a Array) Ints() ([]int64, bool) {
	var out []int64
	switch v := a.Values.(type) {
	case []uint8:
		out = conv(v)
	case []int8:
		out = conv(v)
	case []uint16:
		out = conv(v)
	case []int16:
		out = conv(v)
	case []uint32:
		out = conv(v)
	case []int32:
		out = conv(v)
	case []int64:
		out = v
	case []bool:
		out = make([]int64, len(v))
		for i, b := range v {
			if b {
				out[i] = 1
			}
		}
	case []uint64:
		out = make([]int64, len(v))
		for i, x := range v {
			if x > math.MaxInt64 {
				return nil, false
			}
			out[i] = int64(x)
		}
	default:
		return nil, false
	}
	return out, true
}

func conv[T uint8 | int8 | uint16 | int16 | uint32 | int32](v []T) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// TensorBytes returns the total size of all tensor data.
func (f *File) TensorBytes() uint64 {
	var n uint64
	for _, t := range f.Tensors {
		n += t.Bytes()
	}
	return n
}
