package gateway

import "testing"

func TestLabelEscapesAsPrometheusText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":      "plain",
		"tab\there":  "tab\there", // Prometheus takes a raw tab; %q's \t it rejects
		`q"uote`:     `q\"uote`,
		`back\s`:     `back\\s`,
		"line\nfeed": `line\nfeed`,
		"é":          "é",
	} {
		if got := label(in); got != want {
			t.Errorf("label(%q) = %q, want %q", in, got, want)
		}
	}
}
