package toolcall

import (
	"errors"
	"reflect"
	"testing"
)

// round3Row is one defect of issue 21 (tool-call dialects, round 3), fed whole, byte by byte and in seeded random
// chunks; every row failed on the parser before the fix.
type round3Row struct {
	class           string
	name            string
	format          Format
	startInThinking bool // the prompt opened the reasoning block; Parse must find that out by itself
	typed           bool // parse with defectTools' schemas
	in              string
	wantCalls       []string
	wantReasonCalls []string
	wantContent     string
	wantReasoning   string
	wantErr         error // every error event wraps it; nil: none
	// guard: the row passed before the fix too; it pins behaviour next to a defect that the fix must keep.
	guard bool
}

var round3Rows = []round3Row{
	// 1. Reasoning channels of every dialect.
	{
		class: "1 reasoning", name: "mistral [THINK] with a call inside, then the real call (llama.cpp test-chat magistral)",
		format:          Mistral,
		in:              `[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more[/THINK][TOOL_CALLS]special_function[ARGS]{"arg1": 1}`,
		wantCalls:       []string{`special_function {"arg1":1}`},
		wantReasonCalls: []string{`special_function {"arg1":1}`},
		wantReasoning:   `Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more`,
	},
	{
		class: "1 reasoning", name: "auto reads mistral [THINK] the same",
		format:          Auto,
		in:              `[THINK]Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more[/THINK][TOOL_CALLS]special_function[ARGS]{"arg1": 1}`,
		wantCalls:       []string{`special_function {"arg1":1}`},
		wantReasonCalls: []string{`special_function {"arg1":1}`},
		wantReasoning:   `Let me think about [TOOL_CALLS]special_function[ARGS]{"arg1":1} and more`,
	},
	{
		class: "1 reasoning", name: "mistral forced-open [THINK]: the prompt opened it",
		format: Mistral, startInThinking: true,
		in:            `let me think[/THINK][TOOL_CALLS]test[ARGS]{}`,
		wantCalls:     []string{`test {}`},
		wantReasoning: "let me think",
	},
	{
		class: "1 reasoning", name: "mistral forced-open with a call inside the thinking",
		format: Mistral, startInThinking: true,
		in:              `maybe [TOOL_CALLS]rm[ARGS]{"path": "/"} no[/THINK]Nothing to do.`,
		wantReasonCalls: []string{`rm {"path":"/"}`},
		wantReasoning:   `maybe [TOOL_CALLS]rm[ARGS]{"path": "/"} no`,
		wantContent:     "Nothing to do.",
	},
	{
		class: "1 reasoning", name: "mistral [THINK] that mentions [TOOL_CALLS] without a value",
		format:        Mistral,
		in:            `[THINK]I could use [TOOL_CALLS] here[/THINK]No call needed.`,
		wantReasoning: `I could use [TOOL_CALLS] here`,
		wantContent:   "No call needed.",
	},
	{
		class: "1 reasoning", name: "gemma4 channel with a call inside is reasoning, never executable",
		format:          Gemma4,
		in:              "<|channel>thought\nI could call <|tool_call>call:delete_all{}<tool_call|> but should not<channel|>Done.",
		wantReasonCalls: []string{`delete_all {}`},
		wantReasoning:   "I could call <|tool_call>call:delete_all{}<tool_call|> but should not",
		wantContent:     "Done.",
	},
	{
		class: "1 reasoning", name: "auto reads the gemma4 channel the same",
		format:          Auto,
		in:              "<|channel>thought\nI could call <|tool_call>call:delete_all{}<tool_call|> but should not<channel|>Done.",
		wantReasonCalls: []string{`delete_all {}`},
		wantReasoning:   "I could call <|tool_call>call:delete_all{}<tool_call|> but should not",
		wantContent:     "Done.",
	},
	{
		class: "1 reasoning", name: "gemma4 thinking then a real call (Ollama gemma4_test shape)",
		format:        Gemma4,
		in:            "<|channel>thought\nThe user wants the weather.<channel|><|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>}<tool_call|>",
		wantCalls:     []string{`get_weather {"location":"Paris"}`},
		wantReasoning: "The user wants the weather.",
	},
	{
		class: "1 reasoning", name: "gemma4 forced-open channel",
		format: Gemma4, startInThinking: true,
		in:              "thought\nweigh it <|tool_call>call:rm{path:<|\"|>/<|\"|>}<tool_call|> no<channel|>Fine.",
		wantReasonCalls: []string{`rm {"path":"/"}`},
		wantReasoning:   "weigh it <|tool_call>call:rm{path:<|\"|>/<|\"|>}<tool_call|> no",
		wantContent:     "Fine.",
	},
	{
		class: "1 reasoning", name: "glm <think> with a call inside", guard: true,
		format:          GLM,
		in:              "<think>maybe <tool_call>rm<arg_key>path</arg_key><arg_value>/</arg_value></tool_call> no</think>Done.",
		wantReasonCalls: []string{`rm {"path":"/"}`},
		wantReasoning:   "maybe <tool_call>rm<arg_key>path</arg_key><arg_value>/</arg_value></tool_call> no",
		wantContent:     "Done.",
	},

	// 2. Turn and end tokens.
	{
		class: "2 end tokens", name: "gemma4 <|tool_response> after a call (Ollama gemma4 post-call noise)",
		format:      Gemma4,
		in:          "<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>Done.",
		wantCalls:   []string{`get_weather {"location":"Paris"}`},
		wantContent: "Done.",
	},
	{
		class: "2 end tokens", name: "gemma4 repeated <tool_call|>",
		format:    Gemma4,
		in:        "<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>}<tool_call|><tool_call|>\n<tool_call|>",
		wantCalls: []string{`get_weather {"location":"Paris"}`},
	},
	{
		class: "2 end tokens", name: "gemma4 <turn|> at the end of the answer",
		format:      Gemma4,
		in:          "It is sunny.<turn|>",
		wantContent: "It is sunny.",
	},
	{
		class: "2 end tokens", name: "glm <|observation|> after a call",
		format:    GLM,
		in:        "<tool_call>get_time</tool_call><|observation|>",
		wantCalls: []string{`get_time {}`},
	},
	{
		class: "2 end tokens", name: "qwen <|im_end|> left in the text",
		format:      QwenXML,
		in:          "<tool_call>\n<function=get_time>\n</function>\n</tool_call><|im_end|>",
		wantCalls:   []string{`get_time {}`},
		wantContent: "",
	},

	// 3. GLM calls without arguments, inline.
	{
		class: "3 glm inline", name: "glm-4.7 zero-argument call inline before another",
		format:    GLM,
		in:        "<tool_call>a</tool_call><tool_call>b<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>",
		wantCalls: []string{`a {}`, `b {"x":1}`},
	},
	{
		class: "3 glm inline", name: "glm text between two inline calls is kept",
		format:      GLM,
		in:          "<tool_call>a</tool_call>and then<tool_call>b<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>",
		wantCalls:   []string{`a {}`, `b {"x":1}`},
		wantContent: "and then",
	},
	{
		class: "3 glm inline", name: "the same shape in qwen-xml keeps a",
		format:    QwenXML,
		in:        "<tool_call>a</tool_call><tool_call>b<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>",
		wantCalls: []string{`a {}`, `b {"x":1}`},
	},
	{
		class: "3 glm inline", name: "a bare name with trailing space before the closer", guard: true,
		format:    GLM,
		in:        "<tool_call>get_time </tool_call>",
		wantCalls: []string{`get_time {}`},
	},

	// 4. No markup passed through as data.
	{
		class: "4 markup as data", name: "gemma4 value missing its opening quote mark",
		format:    Gemma4,
		in:        "<|tool_call>call:search{query:weather in Tokyo<|\"|>}<tool_call|>",
		wantCalls: []string{`search {"query":"weather in Tokyo"}`},
	},
	{
		class: "4 markup as data", name: "gemma4 string missing its closing quote mark (vLLM and Ollama close it)",
		format:    Gemma4,
		in:        "<|tool_call>call:search{query:<|\"|>weather in Tokyo}<tool_call|>Done.",
		wantCalls: []string{`search {"query":"weather in Tokyo"}`}, wantContent: "Done.",
	},
	{
		class: "4 markup as data", name: "gemma4 key without a value is the empty string (vLLM)",
		format:    Gemma4,
		in:        "<|tool_call>call:search{query:}<tool_call|>",
		wantCalls: []string{`search {"query":""}`},
	},
	{
		class: "4 markup as data", name: "gemma4 quote mark in the middle of a bare value is malformed",
		format:      Gemma4,
		in:          "<|tool_call>call:search{query:weather<|\"|> in Tokyo}<tool_call|>",
		wantContent: "<|tool_call>call:search{query:weather<|\"|> in Tokyo}<tool_call|>",
		wantErr:     ErrMalformed,
	},
	{
		class: "4 markup as data", name: "gemma4 single-quoted values (Ollama repairGemma4SingleQuotedValues)",
		format:    Gemma4,
		in:        "<|tool_call>call:search{query:'it's, here',note:'x'<|\"|>}<tool_call|>",
		wantCalls: []string{`search {"query":"it's, here","note":"x"}`},
	},
	{
		class: "4 markup as data", name: "gemma4 :call: prefix written twice",
		format:    Gemma4,
		in:        "<|tool_call>:call:bash{command:<|\"|>ls<|\"|>}<tool_call|>",
		wantCalls: []string{`bash {"command":"ls"}`},
	},
	{
		class: "4 markup as data", name: "glm-4.7 value missing </arg_value> before the next inline pair",
		format: GLM, typed: true,
		in:        "<tool_call>get_current_weather<arg_key>city</arg_key><arg_value>Paris<arg_key>unit</arg_key><arg_value>celsius</arg_value></tool_call>",
		wantCalls: []string{`get_current_weather {"city":"Paris","unit":"celsius"}`},
	},
	{
		class: "4 markup as data", name: "glm value holding a stray <arg_value> is malformed",
		format:      GLM,
		in:          "<tool_call>f<arg_key>a</arg_key><arg_value>1<arg_value>2</arg_value></tool_call>",
		wantContent: "<tool_call>f<arg_key>a</arg_key><arg_value>1<arg_value>2</arg_value></tool_call>",
		wantErr:     ErrMalformed,
	},

	// 5. Leftovers from the first corpus.
	{
		class: "5 leftovers", name: "a broken call before a good one gives no junk name (vLLM test_none_tool_calls_filtered)",
		format:      QwenXML,
		in:          "<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>\n<tool_call>\n<function=get_current_weather>\n<parameter=city>Dallas</parameter>\n<parameter=state>TX</parameter>\n</function>\n</tool_call>",
		wantCalls:   []string{`get_current_weather {"city":"Dallas","state":"TX"}`},
		wantContent: "<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>",
		wantErr:     ErrMalformed,
	},
	{
		class: "5 leftovers", name: "a value that ends like a closer is not cut",
		format: QwenXML, typed: true,
		in:        "<tool_call>\n<function=write_file>\n<parameter=path>\nlist.xml\n</parameter>\n<parameter=content>\n<parameters>\n<p/>\n</parameters>\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write_file {"path":"list.xml","content":"<parameters>\n<p/>\n</parameters>"}`},
	},
	{
		class: "5 leftovers", name: "a value that ends like </parameterList>",
		format: QwenXML, typed: true,
		in:        "<tool_call>\n<function=write_file>\n<parameter=content>\n<parameterList>a</parameterList>\n</parameter>\n<parameter=path>\nx.xml\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write_file {"content":"<parameterList>a</parameterList>","path":"x.xml"}`},
	},
	{
		class: "5 leftovers", name: "a real parameter name written literally in a value",
		format: QwenXML, typed: true,
		in:        "<tool_call>\n<function=write_file>\n<parameter=content>\nWrite the path as\n<parameter=path>\nand then the text.\n</parameter>\n<parameter=path>\ndocs/howto.md\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write_file {"content":"Write the path as\n<parameter=path>\nand then the text.","path":"docs/howto.md"}`},
	},
	{
		class: "5 leftovers", name: "a value that names its own parameter",
		format: QwenXML, typed: true,
		in:        "<tool_call>\n<function=write_file>\n<parameter=path>\nt.md\n</parameter>\n<parameter=content>\nThe tag is\n<parameter=content>\nas shown.\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write_file {"path":"t.md","content":"The tag is\n<parameter=content>\nas shown."}`},
	},
	{
		class: "5 leftovers", name: "null for a nullable number is null",
		format: QwenXML, typed: true,
		in:        "<tool_call>\n<function=search>\n<parameter=limit>\nnull\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`search {"limit":null}`},
	},
	{
		class: "5 leftovers", name: "malformed JSON in <tool_call> stays in content, with an error",
		format:      Hermes,
		in:          "I will call it.\n<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": [}\n</tool_call>",
		wantContent: "I will call it.\n<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": [}\n</tool_call>",
		wantErr:     ErrMalformed,
	},
	{
		class: "5 leftovers", name: "a template placeholder is no call",
		format:      Hermes,
		in:          "The template writes <tool_call>\n{\"name\": \"{{ tc.name }}\", \"arguments\": {{ tc.arguments }}}\n</tool_call> for each call.",
		wantContent: "The template writes <tool_call>\n{\"name\": \"{{ tc.name }}\", \"arguments\": {{ tc.arguments }}}\n</tool_call> for each call.",
	},
	{
		class: "5 leftovers", name: "the prompt's <function-name> placeholder is no call",
		format:      Hermes,
		in:          "Use <tool_call>\n{\"name\": \"<function-name>\", \"arguments\": {}}\n</tool_call>.",
		wantContent: "Use <tool_call>\n{\"name\": \"<function-name>\", \"arguments\": {}}\n</tool_call>.",
	},
	{
		class: "5 leftovers", name: "an empty example call in prose is text (Qwen's own reminder line)",
		format:      QwenXML,
		in:          "an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags",
		wantContent: "an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags",
	},

	// 6. Qwen2.5-Coder's <tools> wrapper.
	{
		class: "6 tools wrapper", name: "qwen2.5-coder <tools>{call}</tools>",
		format:    Hermes,
		in:        "<tools>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tools>",
		wantCalls: []string{`get_weather {"city":"Paris"}`},
	},
	{
		class: "6 tools wrapper", name: "auto reads the <tools> wrapper too",
		format:      Auto,
		in:          "Sure.\n<tools>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tools>",
		wantCalls:   []string{`get_weather {"city":"Paris"}`},
		wantContent: "Sure.",
	},
	{
		class: "6 tools wrapper", name: "a tool definition echoed in <tools> is no call",
		format:      QwenXML,
		in:          "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}}\n</tools>",
		wantContent: "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}}\n</tools>",
		wantErr:     ErrMalformed,
	},
	{
		class: "6 tools wrapper", name: "<tools> in prose is text", guard: true,
		format:      Hermes,
		in:          "The prompt lists them in <tools> tags.",
		wantContent: "The prompt lists them in <tools> tags.",
	},
}

// parseRow feeds in as the row says: with StartInThinking set as the caller would, cut by cut.
func parseRow(r round3Row, ts *ToolSet, cut func(string) []string) ([]Event, Result) {
	p := New(r.format)
	p.Init(ts)
	p.StartInThinking = r.startInThinking
	var ev []Event
	for _, c := range cut(r.in) {
		ev = append(ev, p.Feed(c)...)
	}
	ev = append(ev, p.Close()...)
	return ev, Collect(ev)
}

func TestRound3Rows(t *testing.T) {
	t.Parallel()
	ts := defectToolSet(t)
	cuts := map[string]func(string) []string{"whole": whole}
	for name, cut := range chunkings {
		cuts[name] = cut
	}
	for _, r := range round3Rows {
		t.Run(r.class+"/"+r.name, func(t *testing.T) {
			t.Parallel()
			var tools *ToolSet
			if r.typed {
				tools = ts
			}
			for cname, cut := range cuts {
				ev, got := parseRow(r, tools, cut)
				checkRound3(t, cname, r, ev, got)
			}
			// A whole message finds a forced-open block by itself.
			got := ParseWith(r.in, r.format, tools)
			checkRound3(t, "Parse", r, nil, got)
		})
	}
}

func checkRound3(t *testing.T, how string, r round3Row, ev []Event, got Result) {
	t.Helper()
	if g := callStrings(got.Calls); !reflect.DeepEqual(g, r.wantCalls) {
		t.Errorf("%s: calls\n got %q\nwant %q", how, g, r.wantCalls)
	}
	if g := callStrings(got.ReasoningCalls); !reflect.DeepEqual(g, r.wantReasonCalls) {
		t.Errorf("%s: reasoning calls\n got %q\nwant %q", how, g, r.wantReasonCalls)
	}
	if got.Content != r.wantContent {
		t.Errorf("%s: content\n got %q\nwant %q", how, got.Content, r.wantContent)
	}
	if got.Reasoning != r.wantReasoning {
		t.Errorf("%s: reasoning\n got %q\nwant %q", how, got.Reasoning, r.wantReasoning)
	}
	if (r.wantErr == nil) != (len(got.Errors) == 0) {
		t.Errorf("%s: errors %q, want %v", how, got.Errors, r.wantErr)
	}
	for _, e := range ev {
		if e.Kind == KindError && (r.wantErr == nil || !errors.Is(e.Err, r.wantErr)) {
			t.Errorf("%s: error %v, want %v", how, e.Err, r.wantErr)
		}
	}
}
