// Drives the gateway with the Vercel AI SDK (its default Responses provider and its chat provider), LangChain JS
// (chat completions and useResponsesApi) and the OpenAI Node SDK's Responses API: each runs a tool-using,
// multi-step conversation whose first message carries an image. Run by node_test.go:
// node sdks.mjs BASE_URL PNG_PATH MODULES. Prints one JSON object of what each client saw; the Go test checks it.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

const [base, pngPath, modules] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const load = (p) => import(pathToFileURL(require.resolve(p)).href);
const png = fs.readFileSync(pngPath);
const dataURL = 'data:image/png;base64,' + png.toString('base64');
const schema = { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] };

async function vercel(out) {
  const { generateText, streamText, tool, jsonSchema, stepCountIs } = await load('ai');
  const { createOpenAI } = await load('@ai-sdk/openai');
  const provider = createOpenAI({ baseURL: base + '/v1', apiKey: 'unused-on-loopback' });
  const calls = [];
  const tools = { list_dir: tool({ description: 'List a folder', inputSchema: jsonSchema(schema),
    execute: async (args) => { calls.push(args); return ['a.txt']; } }) };
  const messages = [{ role: 'user', content: [{ type: 'text', text: 'what is here?' }, { type: 'image', image: png, mediaType: 'image/png' }] }];
  for (const [name, model, stream] of [['vercelResponses', provider('tiny'), false], ['vercelResponsesStream', provider('tiny'), true],
    ['vercelChat', provider.chat('tiny'), false], ['vercelChatStream', provider.chat('tiny'), true]]) {
    calls.length = 0;
    const opts = { model, tools, messages, stopWhen: stepCountIs(4), maxRetries: 0 };
    let text, steps;
    if (stream) {
      const r = streamText(opts);
      text = await r.text;
      steps = (await r.steps).length;
    } else {
      const r = await generateText(opts);
      text = r.text;
      steps = r.steps.length;
    }
    out[name] = { text, steps, calls: calls.map((c) => JSON.stringify(c)) };
  }
}

async function langchain(out) {
  const { ChatOpenAI } = await load('@langchain/openai');
  const { HumanMessage, ToolMessage } = await load('@langchain/core/messages');
  for (const [name, useResponsesApi] of [['langchainChat', false], ['langchainResponses', true]]) {
    const model = new ChatOpenAI({ model: 'tiny', apiKey: 'unused-on-loopback', configuration: { baseURL: base + '/v1' },
      maxRetries: 0, useResponsesApi }).bindTools([{ type: 'function', function: { name: 'list_dir', description: 'List a folder', parameters: schema } }]);
    const messages = [new HumanMessage({ content: [{ type: 'text', text: 'what is here?' }, { type: 'image_url', image_url: { url: dataURL } }] })];
    const ai = await model.invoke(messages);
    const calls = (ai.tool_calls ?? []).map((c) => [c.name, JSON.stringify(c.args)]);
    messages.push(ai);
    for (const c of ai.tool_calls ?? []) messages.push(new ToolMessage({ tool_call_id: c.id, content: '["a.txt"]' }));
    const final = await model.invoke(messages);
    out[name] = { calls, text: final.text };
  }
}

async function openaiResponses(out) {
  const { default: OpenAI } = await load('openai');
  const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'unused-on-loopback', maxRetries: 0 });
  const tools = [{ type: 'function', name: 'list_dir', description: 'List a folder', parameters: schema, strict: false }];
  const input = [{ role: 'user', content: [{ type: 'input_text', text: 'what is here?' }, { type: 'input_image', image_url: dataURL, detail: 'auto' }] }];
  const first = await client.responses.create({ model: 'tiny', input, tools });
  const calls = first.output.filter((o) => o.type === 'function_call');
  const next = [...input, ...first.output, ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '["a.txt"]' }))];
  const second = await client.responses.create({ model: 'tiny', input: next, tools });
  const stream = client.responses.stream({ model: 'tiny', input: next, tools });
  const streamed = await stream.finalResponse();
  out.openaiResponses = { calls: calls.map((c) => [c.name, c.arguments]), text: second.output_text, streamText: streamed.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join(''),
    model: second.model };
  try {
    await client.responses.create({ model: 'nope', input: 'hi' });
    out.openaiResponsesUnknown = 'no error';
  } catch (e) {
    out.openaiResponsesUnknown = [e.status, e.message];
  }
}

async function main() {
  const out = {};
  for (const f of [vercel, langchain, openaiResponses]) {
    try {
      await f(out);
    } catch (e) {
      out[f.name + 'Error'] = String(e?.stack ?? e);
    }
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
