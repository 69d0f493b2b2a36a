package session

import (
	"testing"
	"time"

	"github.com/visorhq/visor/engine/conductor"
	"github.com/visorhq/visor/engine/launch"
	"github.com/visorhq/visor/engine/llamacpp"
)

// TestLastLaunchNamesTheCostModel: the cost model of a launch comes from its typed placement; only a warm-up
// whose images ran on the GPU measures the first image (a CPU encode has no pipeline to compile).
func TestLastLaunchNamesTheCostModel(t *testing.T) {
	var l LastLaunch
	if _, ok := l.Costs(conductor.Ready{}); ok {
		t.Fatal("costs before any launch")
	}
	warm := llamacpp.WarmupStats{Image: 900 * time.Millisecond, ImagePromptTokens: 300, Prompt: time.Second}
	gpu := launch.Started{Spec: launch.Spec{Model: "/m/q.gguf", Projector: "/m/p.gguf"}, Mode: "resident", GPU: "GPU0",
		ProjectorOnGPU: true, Warmup: warm}
	l.Started(gpu)
	got, ok := l.Costs(conductor.Ready{})
	if !ok || got.Key != gpu.CostKey() || got.EncodesOnCPU || got.Profile != "resident" ||
		got.FirstImage != 900*time.Millisecond || got.FirstImageTokens != 300 {
		t.Errorf("GPU launch: %+v %v", got, ok)
	}
	cpu := gpu
	cpu.ProjectorOnGPU, cpu.GPU = false, ""
	l.Started(cpu)
	if got, _ := l.Costs(conductor.Ready{}); !got.EncodesOnCPU || got.FirstImage != 0 || got.FirstImageTokens != 0 || got.Key != cpu.CostKey() {
		t.Errorf("CPU encode: %+v", got)
	}
}
