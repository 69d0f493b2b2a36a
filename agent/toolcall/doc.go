// Package toolcall finds tool calls that a local model wrote as text and types their arguments from the
// offered tools' schemas. It reads Hermes JSON inside <tool_call> (and Python-literal dicts), the Qwen3.5/3.6 and
// Qwen3-Coder XML form <function=NAME><parameter=ARG>, GLM-4.5/4.7's <arg_key>/<arg_value> pairs, Gemma 4's
// <|tool_call>call:NAME{…}<tool_call|>, Mistral's [TOOL_CALLS]NAME[ARGS]{…} (and the older JSON array), and
// Anthropic-style <function_calls><invoke>. Each Format is one dialect behind one interface (CallParser:
// Init with the tools, Add chunks), and all of them share one streaming scanner that holds back only a
// partially written tag and splits reasoning from content by each family's markers: <think>…</think> everywhere,
// Gemma 4's <|channel>thought…<channel|> and Mistral's [THINK]…[/THINK] in their dialects (and in Auto), also when
// the prompt opened the block (StartInThinking; Parse finds it by a closer before any opener). A call found
// inside reasoning is reported, never returned as executable. Turn and end tokens a server leaves in the text
// (<|im_end|>, GLM's <|observation|>, Gemma 4's <|tool_response>, <turn|> and a repeated <tool_call|>) are
// consumed, never shown.
//
// It exists because llama-server (and other OpenAI-compatible servers) regularly leaves such calls in content or
// reasoning_content with tool_calls empty; see docs/engine-notes.md §5 for the failures each test row reproduces.
//
// # Typing
//
// The XML forms write strings bare and everything else as JSON, so "42" may be a string or a number: the tool's
// schema decides (type, type arrays such as ["string","null"], anyOf/oneOf, enums, const, local $ref). Python
// literals (True, None, {'k': 'v'}) are read only where the schema wants a boolean, null, object or array, and
// null (or None) for a field that cannot be a string is null; a string field keeps the model's exact text. Values keep that text: only the one newline Qwen's template writes
// after <parameter=X> and before </parameter> is removed. Without a schema the type is guessed from the text and
// the guess is recorded, so ToolSet.Check can still undo it.
//
// # Closing tags
//
// A </parameter> ends a value only where what follows is another parameter of the tool, </function>,
// </tool_call> or the end; drifted closers (</parameter1>, </parameter_function>, a bare </parameter) count the
// same way, and a value whose closer is missing ends before the next known <parameter= line. Call tags that open
// at the start of a line inside a value nest until they close, and an end tag in the middle of a line is text, so
// a file that holds "</parameter>" or a whole <tool_call> example stays one argument. When nothing closes a block
// by that structure, its first end tag closes it after all.
//
// # Disputable cases, decided
//
//   - Bare-string arguments ("arguments": "ls -la"): an error event, never a guessed argument name. The model is
//     told and writes an object.
//   - Double-encoded objects ("arguments": "{\"a\": 1}", up to three levels): decoded silently; it is OpenAI's own
//     wire shape.
//   - A valid call beside junk in an array ([{call}, 42]): inside call tags the valid calls run and the junk is an
//     error event; a bare JSON message must be calls and nothing else, or it is content.
//   - Malformed JSON: inside call tags an error event carrying the text (the model meant a call), and the text
//     stays in content as written (Event.Shown), as vLLM and llama.cpp keep it; a bare JSON message that does not
//     parse is content. A block that is no attempt at a call (nothing between the tags, a template placeholder
//     such as {{ tc.name }} or <function-name>, an elision like <function=...>) stays text without an error; any
//     other name that is no function name is malformed.
//   - Qwen2.5-Coder's <tools>{call}</tools>: a call when the JSON has "arguments"; a tool definition echoed in
//     the tag is an error, and <tools> not followed by JSON is text.
//   - An unknown tool name in bare JSON: with tools given (Init), content — {"name": "Ada", "arguments": …} is more
//     likely an answer than a call; inside call tags it is a call, and the registry answers that the tool does not
//     exist. Without tools any name counts.
//   - A call cut off (no end tag): an error wrapping ErrUnclosed, except a Hermes JSON body that is complete. A GLM
//     or Mistral call is complete only with its end tag or closed JSON value.
//
// # Repair policy
//
// Each dialect repairs what its peers repair, and nothing else; a value that would still hold the dialect's own
// markup is a malformed call (an error event, the text kept as content), never data for a tool. Every repair is
// named in Call.Repaired.
//
//   - Hermes JSON: single quotes, Python constants, raw newlines and tabs in strings, an unescaped apostrophe, a
//     missing closing quote, quotes escaped twice (hermes-agent, llama.cpp's lenient JSON); arguments given as a
//     JSON string are decoded (OpenAI's wire shape). A name must be a function name: {{ tc.name }} or
//     <function-name> make the block malformed (vLLM rejects non-identifier names too).
//   - Qwen XML: a missing </parameter> before the next known parameter, drifted closers (</parameter1>, a bare
//     </parameter) and a missing </function> (vLLM qwen3coder, llama.cpp's Qwen3-Coder PEG parser); </parameters>
//     or </parameterList> followed by the real closer is text, and so is a <parameter=K> line inside a value when
//     K is that value's own parameter or is given again further on (a file that documents the tool); null for a field that cannot be a string is null
//     (vLLM's _convert_param_value). An unclosed <function= tag (no '>') is malformed, and the calls after it
//     still count (vLLM test_none_tool_calls_filtered).
//   - GLM: a missing </arg_value> before the next <arg_key>, on its own line (GLM-4.5) or inline when a whole
//     <arg_key>K</arg_key><arg_value> follows (GLM-4.7; SGLang and vLLM's glm4_moe split there); a bare name
//     closed inline is a call without arguments (GLM-4.7's template). A stray <arg_key> or <arg_value> left in a
//     value is malformed. A number written with quotes ("42") for a field that can only be a number is the number
//     (SGLang's glm47 detector).
//   - Gemma 4: single-quoted values and a stray <|"|> right after one, a value missing its opening <|"|> before
//     the closing one, a string missing its closing <|"|> before the call's last brace (Ollama's
//     repairGemma4SingleQuotedValues and repairGemma4MissingStringDelimiter; vLLM takes the rest), a key without a
//     value as the empty string (vLLM's _parse_gemma4_args); a doubled
//     "call:" or a colon before it (":call:bash"). A <|"|> in the middle of a bare value is malformed; "thought\n"
//     after <|channel> is the channel's name, not reasoning (vLLM and Ollama strip it); <|tool_response>, <turn|>
//     and a repeated <tool_call|> are consumed (Ollama's post-call noise rule).
//   - Mistral: the older JSON array and [CALL_ID] are read (vLLM mistral); [THINK]…[/THINK] is reasoning, also
//     when the system prompt forced it open (llama.cpp's Magistral parser); the arguments get Hermes' JSON repairs.
//
// It does not decide whether to execute a call: the agent loop still checks finish_reason, and the registry (or
// ToolSet.Check) validates arguments against the schema before anything runs.
package toolcall
