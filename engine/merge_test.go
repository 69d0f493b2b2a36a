package engine

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestMergeFields: the appended fields and the decoded-and-re-encoded ones are the same JSON object, a field
// replaces a key the body already has, and a key that occurs only nested (a tool parameter named like a field)
// is kept where it is.
func TestMergeFields(t *testing.T) {
	fields := map[string]any{"cache_prompt": true, "n_predict": 0, "temperature": 0}
	cases := []struct{ name, body, want string }{
		{"appended", `{"model":"m","messages":[{"role":"user","content":"say \"temperature\": hot"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"say \"temperature\": hot"}],"cache_prompt":true,"n_predict":0,"temperature":0}`},
		{"empty object", `{ }`, `{"cache_prompt":true,"n_predict":0,"temperature":0}`},
		{"trailing newline", "{\"a\":1}\n", `{"a":1,"cache_prompt":true,"n_predict":0,"temperature":0}`},
		{"replaces a top-level key", `{"temperature":0.7,"n_predict":5}`, `{"cache_prompt":true,"n_predict":0,"temperature":0}`},
		{"nested key kept", `{"tools":[{"parameters":{"properties":{"temperature":{"type":"number"}}}}]}`,
			`{"tools":[{"parameters":{"properties":{"temperature":{"type":"number"}}}}],"cache_prompt":true,"n_predict":0,"temperature":0}`},
	}
	for _, c := range cases {
		got, err := mergeFields([]byte(c.body), fields)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: merged body is not JSON: %v\n%s", c.name, err, got)
		}
		_ = json.Unmarshal([]byte(c.want), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	if _, err := mergeFields([]byte(`[1]`), fields); err == nil {
		t.Error("a body that is not an object merged without an error")
	}
}

// BenchmarkMergeFields compares appending the llama.cpp fields with decoding and re-encoding a request that
// carries a 3 MB screenshot (4 MB of base64): the time every such turn spent before its first byte was sent.
func BenchmarkMergeFields(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` +
		strings.Repeat("iVBORw0KGgoAAAANSUhEUgAA", 4<<20/24) + `"}},{"type":"text","text":"What is on the screen now?"}]}],"stream":true}`)
	fields := map[string]any{"cache_prompt": true, "timings_per_token": false}
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for range b.N {
			if _, err := mergeFields(body, fields); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-reencode", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for range b.N {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil {
				b.Fatal(err)
			}
			for k, v := range fields {
				m[k], _ = json.Marshal(v)
			}
			if out, err := json.Marshal(m); err != nil || !bytes.HasPrefix(out, []byte(`{"cache_prompt"`)) {
				b.Fatal(err)
			}
		}
	})
}
