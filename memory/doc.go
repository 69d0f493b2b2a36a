// Package memory stores conversations in one SQLite file: sessions, messages, tool runs, images as exact bytes,
// engine events; full-text search, resume and fork. It does not call the model.
package memory
