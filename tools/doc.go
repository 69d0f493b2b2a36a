// Package tools provides the tool registry (typed Go functions with JSON Schema generated from their input types,
// validated arguments, timeouts, panic recovery, output caps) and visor's built-in tools. It knows nothing of the
// model or the agent loop.
package tools
