// Package prompts holds visor's text templates (the Hermes and Qwen XML tool prompts), embedded in the binary.
package prompts
