// Package agent runs the model–tool loop: it streams the model, parses tool calls, runs tools and feeds results
// back, emitting every step on one typed event stream. It owns the lookahead (what the next steps will need); it
// does not talk HTTP, SQL or processes itself.
package agent
