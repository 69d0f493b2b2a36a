// Package report reads what visor stored and renders it for people and for the simulator: the steps of a stored
// session (tokens, cache, time to first token, prefills ahead) as a table or a `visor simulate` trace, each
// engine's stored cost model, the sessions commands, and `visor simulate`'s replay of traces against cost presets
// and files.
package report
