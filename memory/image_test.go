package memory

import "testing"

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
