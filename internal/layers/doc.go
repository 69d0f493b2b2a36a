// Package layers holds no code: its tests check visor's dependency rules, so the shape
// front ends → session → agent → (tools, prompts, engine, store) cannot erode unnoticed. TestLayers bans upward
// dependencies; TestImportsFollowTheLayers allows each layer only the packages it may import directly (front ends:
// the session service, the loop's types, images and shared helpers; only cmd wires front ends), keeps test
// fixtures and GPU check programs under internal/, and lists the exceptions still open, each with its issue.
package layers
