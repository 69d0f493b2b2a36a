package toolcall_test

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/visorhq/visor/agent/toolcall"
)

func ExampleParse() {
	r := toolcall.Parse("<think>\nNeed the file.\n</think>\nReading it.\n<tool_call>\n<function=read>\n<parameter=path>\nREADME.md\n</parameter>\n</function>\n</tool_call>", toolcall.QwenXML)
	fmt.Printf("reasoning %q\ncontent %q\n", r.Reasoning, r.Content)
	for _, c := range r.Calls {
		fmt.Println(c.ID, c.Name, string(c.Arguments))
	}
	// Output:
	// reasoning "Need the file."
	// content "Reading it."
	// call_1 read {"path":"README.md"}
}

func ExampleInspect() {
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	in := "<tool_call>\n{'name': 'get_weather', 'arguments': {'town': 'Paris'}}\n</tool_call>"
	ts, err := toolcall.ParseTools([]byte(tools))
	if err != nil {
		fmt.Println(err)
	}
	rep, err := toolcall.Inspect([]byte(in), toolcall.Hermes, ts)
	if err != nil {
		fmt.Println(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rep)
	// Output:
	// {
	//   "content": "",
	//   "reasoning": "",
	//   "calls": [
	//     {
	//       "name": "get_weather",
	//       "arguments": {
	//         "town": "Paris"
	//       }
	//     }
	//   ],
	//   "errors": [
	//     "call 0: arguments do not match the tool's schema: \"get_weather\": validating root: required: missing properties: [\"city\"]"
	//   ]
	// }
}
