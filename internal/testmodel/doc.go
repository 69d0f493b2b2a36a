// Package testmodel writes tiny, deterministic GGUF models that make a real llama-server behave like a
// tool-calling vision chat model: a hand-wired llama chat model ("tiny-bigram", 1.2 MB), the same model in the
// hybrid Qwen3.5 layout ("tiny-hybrid", 2.2 MB, see below) and a CLIP/LLaVA vision projector ("tiny-mmproj",
// 215 KB; SlowProjector makes one whose encode takes seconds). They exist for tests and the demo: a full agent
// loop (call → result → answer) against llama-server in milliseconds, on a CPU, with exact expected outputs.
//
//	chat, projector, err := testmodel.Files(t.TempDir()) // ≈ 5 ms
//	// llama-server -m chat --mmproj projector -c 4096 -np 1
//
// # Chat model
//
// GGUF v3, architecture llama, all F32: n_embd 128, 2 blocks, 4 heads of 32 (so q8_0/q4_0 KV caches work), n_ff
// 128, context 4096, rope base 1e12. Vocabulary (tokenizer.ggml.model gpt2, pre default, no merges): ids 0–255
// are the byte tokens (id = byte value, texts by GPT-2's byte-to-unicode table, so "\n" is "Ċ"); 256
// <|endoftext|> (control; BOS, padding), 257 <|im_start|> (control), 258 <|im_end|> (control; EOS), 259
// <tool_call>, 260 </tool_call>, 261 <tool_response>, 262 </tool_response>, 263 CallBody,
// {"name":"list_dir","arguments":{"path":"."}} (user-defined, so they are single tokens even inside message
// text). add_bos_token is false. With no merges a text costs one token per byte. The chat template is ChatTemplate
// (ChatML with Hermes tools); llama-server b11669 reports supports_tools and supports_tool_calls and builds its
// Hermes JSON grammar from it (call start "<tool_call>\n").
//
// # Wiring
//
// Token embeddings are one-hot over preference classes: every token belongs to one class (a row of the table
// below, or the default) and embeds as that class's unit vector, dims 0–15. ffn_down is zero in both blocks and
// block 1's attention is zero, so the residual stream holds the class vector plus three context features that
// block 0's attention writes into dims 125–127 (dims 16–124 are left to image embeddings):
//
//   - tools (head 0): a <tool_call> token is somewhere in the context. The template's tool instructions contain
//     "<tool_call></tool_call>" (so do visor's raw-mode Hermes and Qwen XML prompts), so this is on exactly when
//     tools were offered.
//   - result (head 1): a <tool_response> token is in the context: some tool has answered.
//   - open (head 2): (opened − closed)/(opened + closed) over <tool_call> and </tool_call> tokens; above 0 only
//     inside a call.
//
// Each head gives every query the same entry on the last rotary pair (which the huge rope base keeps still) and
// only its marked tokens a key there, so a position that can see a marked token puts all its attention on it
// (score ≈ 90) and reads its value; otherwise attention spreads over zero values. output.weight holds the logit
// table: column c is class c's logit row / √128 (the final RMS norm scales the one-hot vector to √128), and the
// feature columns move only two logits: <tool_call> by +40 for tools, −40 for result, −4000 × open; the call
// body by +8000 × open.
//
// The call body token exists because a model that sees only its last token cannot spell
// {"name":"list_dir","arguments":{"path":"."}} byte by byte (after '"' it would need a different successor each
// time). Without a grammar (raw mode: the client renders its own tool prompt and sends no tools) the whole call is
// that one token. With one (native mode) the grammar admits the token only where that exact call is valid; every
// other call is spelled byte by byte, each byte the best the grammar allows.
//
// # Preference table
//
// Logits after a token of each class, best first, ranked 10 apart (10, 0, −10, …). Gaps ≥ 8 make llama-server's
// default sampling (temperature 0.8, min_p 0.05) pick the best allowed token every time, whatever the seed, so
// outputs are exact. A JSON grammar (tool calls, response_format) masks what it forbids and the best remaining
// choice wins; the table is ordered so that that choice yields short, valid JSON.
//
//	class         next, best first                        why
//	"\n"          H { </tool_call> <|im_end|>             the turn opens after "<|im_start|>assistant\n":
//	              (<tool_call> −10, +40 with tools,       answer "Hi!"; with tools and no result <tool_call>
//	              −40 after a result; body −30,           (30) beats H (10). Inside a call ("<tool_call>\n")
//	              +8000 × open)                           the body beats H: the whole call if the grammar
//	                                                      (if any) allows it, else "{" and the bytes
//	H, i          i, !                                    "Hi!"
//	!             <|im_end|> (<tool_call> −40)            stop; if the grammar forbids EOS (tool_choice required
//	                                                      after an answer) the call comes next
//	<tool_call>   \n {                                    the call start "<tool_call>\n"
//	{             " }                                     open the first key; an object with no properties closes
//	"             . : } ] ,                               after an opening quote write "." (so a path argument is
//	                                                      "." and strings are never empty); after a closing quote
//	                                                      take the structural character the grammar needs
//	.             " .                                     close the string: "."
//	:             " 1 t [ { - 0 n f                       a value: string ".", integer/number 1, boolean true,
//	                                                      array, object
//	[             " 1 t { [ ]                             arrays get one element
//	,             " 1 t { [                               next key or element
//	-             1                                       a forced negative number is -1
//	</tool_call>  <|im_end|> \n (<tool_call> −60)         stop after one call, even with parallel_tool_calls
//	body          </tool_call> <|im_end|> \n               close the call (a tool grammar takes </tool_call>
//	                                                      right after the JSON too)
//	default       <|im_end|> } ] </tool_call> , " \n      after a value or a literal (digits, true, names): close
//	                                                      what can be closed, so optional properties are skipped
//	<tool_response>  as default                           its own class only so that head 1 can find it
//
// Tokens a row does not name fall back, 10 apart from −100 down, in byte order with whitespace and special tokens
// last: when the grammar allows none of a row's tokens the lowest allowed byte wins. So an enum takes its
// lowest-sorting value, and among several tools the call goes to the lowest-sorting name ("get_weather" before
// "read_file"), except that a list_dir whose schema takes {"path":"."} wins through the body token. Whitespace is
// never chosen while anything else fits. The body sits at −8100 in every row but "\n", below all ranked tokens
// even with the open feature at its largest, so it is never repeated or written inside a value.
//
// # Behaviour against llama-server b11669 (Debian), default sampling
//
//   - No tools: content "Hi!", finish_reason stop (4 completion tokens).
//   - tools + tool_choice required, no result yet: no content, one call, finish_reason tool_calls, e.g.
//     get_weather {"city":"."} (49 bytes of JSON), list_dir {"path":"."} (the body token: 5 completion tokens);
//     the same streamed as delta.tool_calls.
//   - tools + tool_choice auto (the default), no result yet: the same call. The turn after the result (role
//     tool): content "Hi!", stop. So an agent loop runs call → result → answer and terminates.
//   - Once any tool result is in the context the model answers "Hi!" under auto for the rest of the conversation;
//     under required it answers "Hi!" and then the grammar forces the call (content "Hi!" plus the call).
//   - parallel_tool_calls true: still one call (after </tool_call> EOS wins).
//   - Raw mode (a Hermes tool prompt in the system message, no tools field, so no grammar): content
//     "<tool_call>\n{"name":"list_dir","arguments":{"path":"."}}</tool_call>", finish_reason stop, whatever tools
//     the prompt lists (any prompt whose tool instructions contain <tool_call> and </tool_call> turns the tools
//     feature on; up to 79 earlier calls in the context, see callBodyBoost). Sent back as text, the call
//     tokenizes to the same 4 tokens. After a <tool_response> in a user turn: "Hi!", as in native mode.
//   - tool_choice none with tools: the server renders the tools, sets no grammar and parses nothing, so the
//     content is the raw-mode call above, even when list_dir is not among the tools.
//   - A user message holding an unmatched "<tool_call>" leaves the open feature on, so the next turn opens with
//     the body (then </tool_call>) instead of "Hi!".
//   - Schema {from: enum [PAR, LON], seats: integer, price: number, window: boolean, tags: [string], pax: {name,
//     age}} (all required): {"from":"LON","pax":{"age":1,"name":"."},"price":1,"seats":1,"tags":["."],
//     "window":true} (the server re-encodes arguments with sorted keys). An object with only optional properties
//     gets its first one: {"path":"."}.
//   - response_format json_schema {answer: string, n: integer} (required): {"answer":".","n":1}; json_object:
//     {".":"."}; a GBNF grammar root ::= "yes" | "no": "no".
//   - An image (16×16 PNG as a data-URI image_url part) adds ProjectorOptions.ImageTokens() = 16 prompt tokens
//     and the answer is still "Hi!".
//
// # Hybrid model
//
// WriteHybrid writes the chat model as general.architecture qwen35 (Qwen3.5/3.6 dense): 4 layers, layers 0–2
// Gated DeltaNet (linear attention: conv 4, state 32, 2 key and 4 value heads) with zero output projections,
// layer 3 full attention with Qwen3.5's q/gate projection, per-head q/k RMS norms and partial multimodal rotary
// (16 of 32 dims, sections 3/3/2/0). Its vocabulary, template, embeddings, logit table and three feature heads
// are the llama model's (wired into layer 3: the q/k norms fix the score at √32·4² ≈ 90, the zero gate halves the
// output, which attn_output doubles back), so it answers exactly as the llama model does, tool calls included.
// What differs is the server's memory: a recurrent state it can extend but not cut back, with context
// checkpoints, as on the real Qwen3.5/3.6. A prompt that diverges from the cached one is reused only up to a
// checkpoint, which is what makes prefilling ahead tricky there (see agent.Agent.Prefill).
//
// # Projector
//
// GGUF v3, architecture clip, projector_type mlp (LLaVA-1.5): a ViT of 2 blocks, n_embd 32, 4 heads, n_ff 128,
// pre-layernorm, GELU, image 32×32 in 8×8 patches plus a class embedding, CLIP's mean/std; then mm.0 (32 → 128),
// GELU, mm.2 (128 → 128) into the chat model's n_embd, nonzero only on dims 16–124. Weights are seeded noise
// (±0.05): the chat model reads none of dims 16–124, so image embeddings only have to be finite and an image
// changes nothing but the prompt length. Images are resized to ImageSize, so any image costs
// (ImageSize/PatchSize)² tokens. ProjectorOptions scales the encoder up to make encoding cost real CPU time.
package testmodel
