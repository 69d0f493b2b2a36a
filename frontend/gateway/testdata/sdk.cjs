// Drives the gateway with the official OpenAI Node SDK. Run by node_test.go: node sdk.cjs BASE_URL PNG_PATH.
// Prints one JSON object of what each step saw; the Go test checks it.
const fs = require('fs');
const OpenAI = require('openai');

const [base, pngPath] = process.argv.slice(2);
const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused-on-loopback', maxRetries: 0 });
const tools = [{ type: 'function', function: { name: 'list_dir', description: 'List a folder',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } }];
const user = (content) => ({ role: 'user', content });

async function main() {
  const out = {};
  const chat = await client.chat.completions.create({ model: 'tiny', messages: [user('hello')] });
  out.chat = chat.choices[0].message.content;

  let streamed = '';
  let chunks = 0;
  const stream = await client.chat.completions.create({ model: 'tiny', messages: [user('hello')], stream: true });
  for await (const c of stream) {
    chunks++;
    streamed += c.choices[0]?.delta?.content ?? '';
  }
  out.stream = streamed;
  out.streamChunks = chunks;

  const msgs = [user('what is here?')];
  const call = await client.chat.completions.create({ model: 'tiny', messages: msgs, tools });
  const m = call.choices[0].message;
  out.call = m.tool_calls?.map((t) => [t.function.name, t.function.arguments]);
  msgs.push(m, { role: 'tool', tool_call_id: m.tool_calls[0].id, content: '["a.txt"]' });
  const after = await client.chat.completions.create({ model: 'tiny', messages: msgs, tools });
  out.afterResult = after.choices[0].message.content;

  const png = fs.readFileSync(pngPath).toString('base64');
  const img = await client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: [
    { type: 'text', text: 'what is this?' },
    { type: 'image_url', image_url: { url: 'data:image/png;base64,' + png } }] }] });
  out.image = img.choices[0].message.content;
  out.imagePromptTokens = img.usage.prompt_tokens;

  const text = await client.chat.completions.create({ model: 'tiny-text', messages: [user('what is here?')], tools });
  out.textCall = text.choices[0].message.tool_calls?.map((t) => [t.function.name, t.function.arguments]);
  out.textFinish = text.choices[0].finish_reason;
  out.textContent = text.choices[0].message.content;

  const runner = client.chat.completions.stream({ model: 'tiny-text', messages: [user('what is here?')], tools });
  const final = await runner.finalChatCompletion();
  out.textStreamCall = final.choices[0].message.tool_calls?.map((t) => [t.function.name, t.function.arguments]);

  try {
    await client.chat.completions.create({ model: 'nope', messages: [user('hi')] });
    out.unknown = 'no error';
  } catch (e) {
    out.unknown = [e.status, e.message];
  }
  const models = await client.models.list();
  out.models = models.data.map((x) => x.id);
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
