// Package gateway provides visor's OpenAI-compatible HTTP endpoint: /v1/chat/completions (streaming or not,
// tools, images), /v1/responses (translated to chat completions and back), /v1/models and /v1/models/{id},
// a management API under /v1/visor/, /health and /metrics, in front of several models by name. Each local model is
// started by its own engine (a conductor, which the command builds from the VRAM plan) on the first request
// that names it; a request for a model that cannot be loaded beside the current one waits for the requests on it
// to finish, then swaps (one model, or one group, at a time), and an idle model unloads after a set time. A name
// may also stand for a remote OpenAI-compatible server.
//
// Bodies pass to llama-server as they came and answers come back as the server wrote them, streamed chunk by
// chunk, so the gateway adds next to nothing. The exception is tool calls: when a request offers tools, the
// gateway reads the answer through visor's parser (agent/toolcall, typed by the request's schemas) and turns
// a call the server left in content or in reasoning_content, or one it failed to parse ("Failed to parse input
// at pos N": asked again with tool_choice "none" and parsed here), into proper tool_calls; when streaming, it
// holds back only what the parser holds back. Every such repair is counted in /metrics.
//
// A request's data-URL images go through visor's image intake before it queues. With Model.ServerSlots above
// Slots, requests are pinned to server slots and a waiting request's images are evaluated in a spare one
// (session.QueuedPrefill says when), then the request is sent there; /metrics counts those prefills and their
// hidden time.
//
// Requests go through httpguard: loopback Host and same-origin checks, JSON bodies only, and an API key
// required to listen off loopback. Requests beyond a model's slots wait in a bounded queue (429 when it is full,
// 503 after the queue timeout, both with Retry-After).
//
// Which models are loaded, the queue and the slots are the session service's (session.Engines over
// engine/residency and engine/slots), as are the recording of traffic as sessions (session.ClientRecorder) and the
// rendering of tools as text for a model whose server must not handle them (session.ToolsAsText). It does not
// start engines itself (Model.Open does), batch requests, or translate other APIs (Anthropic, Ollama).
package gateway
