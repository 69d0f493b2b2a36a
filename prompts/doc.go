// Package prompts holds visor's text templates (the Hermes, Qwen XML, GLM, Gemma 4 and Mistral tool prompts),
// embedded in the binary.
//
// ToolSystem renders the system prompt that teaches a model without native tool support (or a server whose
// template drops tools) how to call tools; ToolResponse wraps a tool's result for the user turn that carries it
// back. The text follows the formats the models were trained on (Hermes/Qwen3 JSON in <tool_call>, Qwen3.5/3.6
// XML <function=…>, GLM-4.5's <arg_key> pairs, Gemma 4's <|tool>declaration blocks, Mistral's
// [AVAILABLE_TOOLS]), because small local models follow their training text far better than paraphrases.
// Parsing what the model answers is agent/toolcall's job, not this package's.
package prompts
