package toolcall

import (
	"strings"
	"testing"
	"time"
)

// Adversarial shapes at half a MiB must stay linear: a quadratic path (seen once: unclosed XML parameters) took
// tens of seconds here, linear code takes well under one. The bound is loose so a busy machine does not flake.
func TestAdversarialInputsStayLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	t.Parallel()
	n := 1 << 19
	cases := map[string]string{
		"quotes":   "<tool_call>{'a': " + strings.Repeat("'", n) + "</tool_call>",
		"squotes2": "<tool_call>{'name': 'x', 'arguments': {'q': '" + strings.Repeat("a' b", n/4) + "'}}</tool_call>",
		"params":   "<tool_call><function=f><parameter=a>" + strings.Repeat("</parameter>x", n/13) + "</function></tool_call>",
		"params2":  "<tool_call><function=f>" + strings.Repeat("<parameter=a>x</parameter>y", n/27) + "</function></tool_call>",
		"lt":       strings.Repeat("<", n),
		"ltthink":  "<think>" + strings.Repeat("<tool_cal", n/9),
		"braces":   strings.Repeat("{", n),
		"calls":    strings.Repeat("<tool_call>{\"name\":\"a\"}</tool_call>", n/34),
		"invokes":  "<function_calls>" + strings.Repeat("<invoke name=\"a\"><parameter name=\"b\">", n/40) + "</function_calls>",
		"semis":    "<tool_call>" + strings.Repeat("{\"name\":\"a\"};", n/14) + "</tool_call>",
		"brackets": strings.Repeat("a[", n/2) + "<tool_call>",
		"gquotes":  "<|tool_call>call:f{a:" + strings.Repeat("<|\"|>x", n/6) + "<tool_call|>",
		"mistral":  "[TOOL_CALLS]f[ARGS]" + strings.Repeat("{\"a\":[", n/6),
		"nested":   "<tool_call>\n<function=f>\n<parameter=a>\n" + strings.Repeat("<tool_call>\n<function=g>\n</parameter>\n", n/40),
		"glm":      "<tool_call>f" + strings.Repeat("<arg_key>a</arg_key><arg_value></arg_value>x", n/45) + "</tool_call>",
	}
	for name, in := range cases {
		for _, cutName := range []string{"whole", "chunk7"} {
			st := time.Now()
			p := New(Auto)
			if cutName == "whole" {
				p.Feed(in)
			} else {
				for i := 0; i < len(in); i += 7 {
					p.Feed(in[i:min(i+7, len(in))])
				}
			}
			p.Close()
			if d := time.Since(st); d > 5*time.Second {
				t.Errorf("%s %s: %v", name, cutName, d)
			}
		}
	}
}
