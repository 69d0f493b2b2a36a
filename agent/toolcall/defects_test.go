package toolcall

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// defectTools are the schemas the defect rows are typed with: the shapes agents offer (an edit tool, a file
// writer) and the ones Pydantic writes (Optional[...] as anyOf with null, type arrays, enums).
const defectTools = `[
 {"type":"function","function":{"name":"get_current_weather","parameters":{"type":"object","properties":{
   "city":{"type":"string"},"state":{"type":"string"},"unit":{"type":"string","enum":["fahrenheit","celsius"]}},
   "required":["city","state"]}}},
 {"type":"function","function":{"name":"edit","parameters":{"type":"object","properties":{
   "path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}},"required":["path","old","new"]}}},
 {"type":"function","function":{"name":"write_file","parameters":{"type":"object","properties":{
   "path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}}},
 {"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{
   "query":{"anyOf":[{"type":"string"},{"type":"null"}]},
   "count":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":5},
   "verbose":{"type":["boolean","null"]},
   "filters":{"anyOf":[{"type":"object"},{"type":"null"}]},
   "tags":{"type":"array","items":{"type":"string"}},
   "level":{"enum":["1","2","3"]},
   "note":{"type":"string"},
   "limit":{"type":"number","nullable":true}}}}},
 {"type":"function","function":{"name":"echo","parameters":{"type":"object","properties":{
   "text":{"type":"string"}},"required":["text"]}}}
]`

func defectToolSet(t testing.TB) *ToolSet {
	t.Helper()
	ts, err := ParseTools([]byte(defectTools))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// parseStream parses text fed in the pieces cut makes, with the tools' schemas given to the parser.
func parseStream(f Format, ts *ToolSet, text string, cut func(string) []string) Result {
	p := New(f)
	p.Init(ts)
	var ev []Event
	for _, c := range cut(text) {
		ev = append(ev, p.Feed(c)...)
	}
	return Collect(append(ev, p.Close()...))
}

type defectRow struct {
	class       string // which of the defect classes the row shows
	name        string
	format      Format
	in          string
	wantCalls   []string
	wantContent string
}

var defectRows = []defectRow{
	{
		class: "1 unclosed or drifted closer", name: "vLLM qwen3coder: missing </parameter> before the next parameter",
		format:      QwenXML,
		in:          "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
		wantCalls:   []string{`get_current_weather {"city":"Dallas","state":"TX","unit":"fahrenheit"}`},
		wantContent: "Let me check the weather for you:",
	},
	{
		class: "1 unclosed or drifted closer", name: "</parameter1>",
		format:    QwenXML,
		in:        "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter1>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`get_current_weather {"city":"Dallas","state":"TX"}`},
	},
	{
		class: "1 unclosed or drifted closer", name: "</parameter_function> between parameters",
		format:    QwenXML,
		in:        "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter_function>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`get_current_weather {"city":"Dallas","state":"TX"}`},
	},
	{
		class: "1 unclosed or drifted closer", name: "bare </parameter at the end of a line",
		format:    QwenXML,
		in:        "<tool_call>\n<function=edit>\n<parameter=path>\nmain.go\n</parameter\n<parameter=old>\nfoo()\n</parameter>\n<parameter=new>\nbar()\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`edit {"path":"main.go","old":"foo()","new":"bar()"}`},
	},
	{
		class: "2 exact text", name: "one indented line keeps its indentation",
		format:    QwenXML,
		in:        "<tool_call>\n<function=edit>\n<parameter=path>\napp.py\n</parameter>\n<parameter=old>\n    print(\"x\")\n</parameter>\n<parameter=new>\n    print(\"y\")  \n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`edit {"path":"app.py","old":"    print(\"x\")","new":"    print(\"y\")  "}`},
	},
	{
		class: "2 exact text", name: "inline value with a leading tab",
		format:    QwenXML,
		in:        "<tool_call>\n<function=edit>\n<parameter=path>a.go</parameter>\n<parameter=old>\treturn nil</parameter>\n<parameter=new>\treturn err</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`edit {"path":"a.go","old":"\treturn nil","new":"\treturn err"}`},
	},
	{
		class: "3 anyOf/oneOf/nullable", name: "Optional[str] keeps digits a string, Optional[int] is a number, a type array takes null",
		format:    QwenXML,
		in:        "<tool_call>\n<function=search>\n<parameter=query>\n42\n</parameter>\n<parameter=count>\n10\n</parameter>\n<parameter=verbose>\nnull\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`search {"query":"42","count":10,"verbose":null}`},
	},
	{
		class: "3 anyOf/oneOf/nullable", name: "an enum of digit strings stays strings",
		format:    QwenXML,
		in:        "<tool_call>\n<function=search>\n<parameter=level>\n2\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`search {"level":"2"}`},
	},
	{
		class: "4 Python literals", name: "True, None, a single-quoted dict and list where the schema wants them",
		format:    QwenXML,
		in:        "<tool_call>\n<function=search>\n<parameter=verbose>\nTrue\n</parameter>\n<parameter=query>\nNone\n</parameter>\n<parameter=filters>\n{'lang': 'go', 'stars': 5, 'fork': False}\n</parameter>\n<parameter=tags>\n['a', 'b']\n</parameter>\n<parameter=note>\nTrue\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`search {"verbose":true,"query":null,"filters":{"lang":"go","stars":5,"fork":false},"tags":["a","b"],"note":"True"}`},
	},
	{
		class: "5 literal tags in values", name: "a file that holds a whole <tool_call> example",
		format:      QwenXML,
		in:          "Writing the doc.\n<tool_call>\n<function=write_file>\n<parameter=path>\ndocs/tools.md\n</parameter>\n<parameter=content>\n# Calling tools\nWrite:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\nThat is all.\n</parameter>\n</function>\n</tool_call>",
		wantCalls:   []string{`write_file {"path":"docs/tools.md","content":"# Calling tools\nWrite:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\nThat is all."}`},
		wantContent: "Writing the doc.",
	},
	{
		class: "5 literal tags in values", name: "code that prints </tool_call> mid-line",
		format:      QwenXML,
		in:          "<tool_call>\n<function=write_file>\n<parameter=path>\nt.py\n</parameter>\n<parameter=content>\nprint(\"</tool_call>\")\n</parameter>\n</function>\n</tool_call>\nDone.",
		wantCalls:   []string{`write_file {"path":"t.py","content":"print(\"</tool_call>\")"}`},
		wantContent: "Done.",
	},
	{
		class: "5 literal tags in values", name: "an XML file with </parameter> before a tag that is no parameter of the tool",
		format:    QwenXML,
		in:        "<tool_call>\n<function=write_file>\n<parameter=content>\n<a>\n</parameter>\n<parameter=colour>\n</a>\n</parameter>\n<parameter=path>\nx.xml\n</parameter>\n</function>\n</tool_call>",
		wantCalls: []string{`write_file {"content":"<a>\n</parameter>\n<parameter=colour>\n</a>","path":"x.xml"}`},
	},
}

// TestDefectRows: each row reproduces one of the defect classes of issue 9 and fails on the parser before it.
func TestDefectRows(t *testing.T) {
	t.Parallel()
	ts := defectToolSet(t)
	cuts := map[string]func(string) []string{"whole": whole}
	for name, cut := range chunkings {
		cuts[name] = cut
	}
	for _, r := range defectRows {
		t.Run(r.class+"/"+r.name, func(t *testing.T) {
			t.Parallel()
			for cname, cut := range cuts {
				got := parseStream(r.format, ts, r.in, cut)
				if g := callStrings(got.Calls); !reflect.DeepEqual(g, r.wantCalls) {
					t.Errorf("%s: calls\n got %q\nwant %q", cname, g, r.wantCalls)
				}
				if got.Content != r.wantContent || len(got.Errors) > 0 {
					t.Errorf("%s: content %q errors %q, want content %q", cname, got.Content, got.Errors, r.wantContent)
				}
				for i := range got.Calls {
					if err := ts.Check(&got.Calls[i]); err != nil {
						t.Errorf("%s: %v", cname, err)
					}
				}
			}
		})
	}
}

// TestCallsArriveTyped is the agent-loop defect at the parser's level: the loop runs the Call it gets from the
// event stream and never calls Check, so the event itself must carry "42" as the string its schema says — the
// same arguments `visor toolcalls parse --tools` prints.
func TestCallsArriveTyped(t *testing.T) {
	t.Parallel()
	ts := defectToolSet(t)
	in := "<tool_call>\n<function=echo>\n<parameter=text>\n42\n</parameter>\n</function>\n</tool_call>"
	const want = `{"text":"42"}`
	cuts := map[string]func(string) []string{"whole": whole}
	for name, cut := range chunkings {
		cuts[name] = cut
	}
	for name, cut := range cuts {
		p := New(QwenXML)
		p.Init(ts)
		var ev []Event
		for _, c := range cut(in) {
			ev = append(ev, p.Feed(c)...)
		}
		ev = append(ev, p.Close()...)
		var got []string
		for _, e := range ev {
			if e.Kind == KindCall {
				got = append(got, string(e.Call.Arguments))
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: call arguments %q, want %s", name, got, want)
		}
	}
	o, _ := runCmd(t, in, "qwen-xml", []byte(defectTools))
	var compact bytes.Buffer
	if len(o.Calls) != 1 || json.Compact(&compact, o.Calls[0].Arguments) != nil || compact.String() != want || len(o.Errors) != 0 {
		t.Errorf("toolcalls parse: %+v, want %s", o, want)
	}
}
