// Package toolcall finds tool calls that a local model wrote as text: Hermes JSON inside <tool_call>, Python-literal
// dicts, the Qwen3.5/3.6/Coder XML form <function=NAME><parameter=ARG>, and Anthropic-style <function_calls><invoke>.
// It works incrementally on a token stream, holding back only a partially written tag, and splits <think> reasoning
// from content. A call found inside reasoning is reported, never returned as executable.
//
// It exists because llama-server (and other OpenAI-compatible servers) regularly leaves such calls in content or
// reasoning_content with tool_calls empty; see engine-notes §5 for the failures each test row reproduces.
//
// It does not decide whether to execute a call: the agent loop still checks finish_reason and the tool's schema
// (ToolSet.Check does the latter) before running anything.
package toolcall
