package launch

import (
	"slices"
	"testing"

	"github.com/visorhq/visor/engine/llamacpp"
)

func TestOffloadedThreads(t *testing.T) {
	for _, c := range []struct{ logical, physical, want int }{
		{16, 16, 14}, // a VM without SMT: two CPUs left for visor and the rest
		{16, 8, 0},   // SMT: the default (8) leaves the siblings free
		{4, 4, 2},
		{2, 2, 0},
		{16, 0, 14}, // topology unknown: taken as no SMT
	} {
		if got := OffloadedThreads(c.logical, c.physical); got != c.want {
			t.Errorf("OffloadedThreads(%d, %d) = %d, want %d", c.logical, c.physical, got, c.want)
		}
	}
	attempts := []llamacpp.Attempt{
		{Name: "resident", Args: []string{"-ngl", "999", "--mmproj", "p.gguf"}},
		{Name: "vision-cpu", Args: []string{"-ngl", "999", "--mmproj", "p.gguf", "--no-mmproj-offload"}},
		{Name: "cpu", Args: []string{"-ngl", "0"}},
	}
	got := withOffloadedThreads(llamacpp.Config{}, slices.Clone(attempts), 14)
	if !slices.Equal(got[0].Args[len(got[0].Args)-2:], []string{"-t", "14"}) {
		t.Errorf("fully offloaded attempt: %v, want -t 14 added", got[0].Args)
	}
	if len(got[1].Args) != len(attempts[1].Args) || len(got[2].Args) != len(attempts[2].Args) {
		t.Errorf("a CPU encoder or CPU layers got fewer threads: %v %v", got[1].Args, got[2].Args)
	}
	for _, base := range []llamacpp.Config{{Threads: 4}, {ExtraArgs: []string{"--threads", "6"}}} {
		if g := withOffloadedThreads(base, slices.Clone(attempts), 14); len(g[0].Args) != len(attempts[0].Args) {
			t.Errorf("the user's own thread count was overridden: %v", g[0].Args)
		}
	}
}
