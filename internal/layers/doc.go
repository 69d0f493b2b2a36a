// Package layers holds no code: its test checks visor's dependency rules, so the shape
// front ends → session → agent → (tools, prompts, engine, store) cannot erode unnoticed.
package layers
