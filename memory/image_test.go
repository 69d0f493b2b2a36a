package memory

import (
	"encoding/binary"
	"testing"
)

func riff(fourcc string, payload []byte) []byte {
	var b []byte
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(12+len(payload)))
	b = append(b, "WEBP"...)
	b = append(b, fourcc...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func TestWebPSize(t *testing.T) {
	lossy := []byte{0x50, 0x01, 0x00, 0x9d, 0x01, 0x2a}
	lossy = binary.LittleEndian.AppendUint16(lossy, 1920)
	lossy = binary.LittleEndian.AppendUint16(lossy, 1080|0xc000) // top bits are the scale, not size
	lossy = append(lossy, 0, 0)
	ext := []byte{0x10, 0, 0, 0, 0xff, 0x0f, 0x00, 0x3f, 0x02, 0x00} // canvas 4096 x 576
	cases := []struct {
		name string
		data []byte
		w, h int
		ok   bool
	}{
		{"lossy", riff("VP8 ", lossy), 1920, 1080, true},
		{"lossless", webpLossless(300, 17), 300, 17, true},
		{"extended", riff("VP8X", append(ext, make([]byte, 8)...)), 4096, 576, true},
		{"bad start code", riff("VP8 ", append([]byte{0, 0, 0, 1, 2, 3}, make([]byte, 8)...)), 0, 0, false},
		{"truncated", riff("VP8L", []byte{0x2f}), 0, 0, false},
		{"not riff", []byte("RIFX0000WEBPVP8L00000000000000000000"), 0, 0, false},
		{"empty", nil, 0, 0, false},
	}
	for _, c := range cases {
		w, h, ok := webpSize(c.data)
		if w != c.w || h != c.h || ok != c.ok {
			t.Errorf("%s: %d×%d %v, want %d×%d %v", c.name, w, h, ok, c.w, c.h, c.ok)
		}
	}
}

func TestCapTextKeepsUTF8Whole(t *testing.T) {
	s := "aé€😀"
	for n := 0; n <= len(s); n++ {
		got := capText(s, n)
		if len(got) > n || !utf8Valid(got) {
			t.Errorf("capText(%q, %d) = %q", s, n, got)
		}
	}
}

func utf8Valid(s string) bool {
	for _, r := range s {
		if r == 0xfffd {
			return false
		}
	}
	return true
}
