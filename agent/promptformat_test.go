package agent

import (
	"strings"
	"testing"

	"github.com/visorhq/visor/agent/toolcall"
	"github.com/visorhq/visor/prompts"
)

// Raw mode teaches the syntax its parser reads: --tool-format gemma4 gets Gemma 4's declarations, not the Hermes
// prompt (issue 21), and so for every dialect; auto gets Hermes.
func TestRawPromptMatchesTheParsedDialect(t *testing.T) {
	t.Parallel()
	marks := map[toolcall.Format]string{
		toolcall.Auto: "<tool_call></tool_call> XML tags", toolcall.Hermes: "<tool_call></tool_call> XML tags",
		toolcall.QwenXML: "<function=example_function_name>", toolcall.GLM: "<arg_key>{arg-key-1}</arg_key>",
		toolcall.Gemma4: "<|tool>declaration:list_dir{", toolcall.Mistral: "[AVAILABLE_TOOLS][",
	}
	for f, mark := range marks {
		sys, err := prompts.ToolSystem(promptFormat(f), "", []prompts.ToolSpec{{Name: "list_dir"}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(sys, mark) {
			t.Errorf("%s: the raw-mode prompt lacks %q:\n%s", f, mark, sys)
		}
	}
}
