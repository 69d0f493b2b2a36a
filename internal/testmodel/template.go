package testmodel

// ChatTemplate is the chat model's tokenizer.chat_template: ChatML turns with Hermes tool calling.
//
// Tools go into the system turn as one JSON object per line inside <tools></tools>. An assistant call is rendered
// as "<tool_call>\n{"name": …, "arguments": …}\n</tool_call>" right after "<|im_start|>assistant\n" (content, if
// any, comes first), so llama.cpp's template analyser finds the call start "<tool_call>\n" after the generation
// prompt and reports JSON-native tool calls; a bare "<tool_call>" without the newline would be taken for content.
// Arguments are rendered whether they arrive as a JSON string or an object. Results (role tool) become
// <tool_response> blocks in one user turn per run of consecutive results, as Hermes and Qwen2.5 expect.
const ChatTemplate = `{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}
{{- messages[0].content + '\n\n' }}
{%- endif %}
{{- '# Tools\n\nYou may call one or more functions. Their signatures are inside <tools></tools>:\n<tools>' }}
{%- for tool in tools %}
{{- '\n' }}{{- tool | tojson }}
{%- endfor %}
{{- '\n</tools>\n\nTo call a function, answer with a JSON object holding its name and arguments inside <tool_call></tool_call> tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{%- if not loop.first %}
{{- '<|im_start|>system\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- elif message.role == 'user' %}
{{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}
{{- '\n' + message.content }}
{%- endif %}
{%- if message.tool_calls %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}
{%- set tool_call = tool_call.function %}
{%- endif %}
{{- '\n<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}
{{- tool_call.arguments }}
{%- else %}
{{- tool_call.arguments | tojson }}
{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
{{- '<|im_start|>user' }}
{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
`
