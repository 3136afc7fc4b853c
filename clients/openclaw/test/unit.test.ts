/** The plugin's engine and tools against a real lcm-server, without OpenClaw's host. */
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";
import plugin from "../index.ts";
import { LcmError } from "../src/client.ts";
import { resolveConfig } from "../src/config.ts";
import { createLcmEngine, replayTarget } from "../src/engine.ts";
import { fromLcm, toLcm, turnUsage } from "../src/messages.ts";
import { createLcmTools } from "../src/tools.ts";
import { assistantMsg, config, lcm, toolResultMsg, unique, userMsg } from "./helpers.ts";

test("register() declares the engine, the four tools and /lcm, sharing one breaker", async () => {
  const engines: [string, () => any][] = [];
  const tools: string[][] = [];
  const commands: any[] = [];
  plugin.register({
    pluginConfig: { baseUrl: "http://127.0.0.1:9", apiKey: "k", timeoutMs: 500 },
    registerContextEngine: (id: string, factory: () => any) => engines.push([id, factory]),
    registerTool: (_factory: unknown, opts: { names: string[] }) => tools.push(opts.names),
    registerCommand: (def: any) => commands.push(def),
  });
  assert.deepEqual(engines.map(([id]) => id), ["lcm"]);
  assert.deepEqual(tools, [["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"]]);
  assert.deepEqual([commands[0].name, commands[0].acceptsArgs], ["lcm", true]);
  // OpenClaw builds an engine per operation: the breaker one opened stays open for the next.
  const factory = engines[0][1];
  await assert.rejects(factory().assemble({ sessionKey: "x", messages: [], tokenBudget: 10 }), (e: any) => e.code === "unreachable");
  await assert.rejects(factory().assemble({ sessionKey: "x", messages: [], tokenBudget: 10 }), (e: any) => e.code === "circuit_open");
  assert.match((await commands[0].handler({ args: "status", sessionKey: "x" })).text, /circuit open/);
});

test("config refuses a missing key and odd values", () => {
  assert.throws(() => resolveConfig({}, {}), /apiKey is required/);
  assert.throws(() => resolveConfig({ apiKey: "k", timeoutMs: -1 }, {}), /timeoutMs/);
  assert.throws(() => resolveConfig({ apiKey: "k", sessionKeySource: "x" }, {}), /sessionKeySource/);
  assert.equal(resolveConfig({}, { LCM_API_KEY: "env" }).apiKey, "env");
});

test("messages round-trip: tool calls and results stay paired", () => {
  const call = { id: "toolu_1", name: "ls", arguments: { p: "/" } };
  const sent = [userMsg("list"), assistantMsg("calling", call), toolResultMsg("toolu_1", "ls", "a.txt")];
  const stored = sent.map((m) => toLcm(m)!);
  assert.equal(stored[2].role, "tool");
  // What lcm-server assembles: tool results inside a user message.
  const back = fromLcm([
    { role: "user", content: [{ type: "text", text: "list" }] },
    { role: "assistant", content: stored[1].content },
    { role: "user", content: stored[2].content },
  ]);
  assert.deepEqual(back.map((m) => m.role), ["user", "assistant", "toolResult"]);
  assert.equal(back[1].content[1].type, "toolCall");
  assert.equal(back[2].toolCallId, "toolu_1");
  assert.equal(back[2].toolName, "ls");
  assert.equal(toLcm(sent[0])!.id, toLcm({ ...sent[0] })!.id, "client ids are stable");
});

function thinkingMsg(name: string, model: string) {
  const message = assistantMsg(`reading ${name}`, { id: `toolu_${name}`, name: "read", arguments: { path: name } });
  message.content.unshift({ type: "thinking", thinking: `plan ${name}`, thinkingSignature: `SIG-${name}` });
  return { ...message, provider: "anthropic", model };
}

test("assistant messages carry their model; signed thinking reaches only that model", async () => {
  const a = thinkingMsg("a", "model-a"), b = thinkingMsg("b", "model-b");
  assert.deepEqual([toLcm(a)!.provider, toLcm(a)!.model], ["anthropic", "model-a"]);
  assert.equal(toLcm(userMsg("hi"))!.model, undefined);
  assert.equal(toLcm({ ...a, model: "m".repeat(201) })!.model, undefined, "too long: left out, not cut");
  assert.deepEqual(replayTarget({ model: { resolved: "anthropic/model-a", provider: "anthropic" } }), { provider: "anthropic", model: "model-a" });

  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("replay"), sessionId: "s1" };
  // One loop, a failover from model A to model B: both calls answered together.
  const results = [toolResultMsg("toolu_a", "read", "A"), toolResultMsg("toolu_b", "read", "B")];
  await engine.ingestBatch({ ...ids, messages: [userMsg("look"), a, b, ...results] });
  const assembleFor = async (model: string) => {
    const runtimeSettings = { model: { resolved: `anthropic/${model}`, provider: "anthropic" } };
    return (await engine.assemble({ ...ids, messages: [], tokenBudget: 100000, runtimeSettings })).messages;
  };
  const forA = await assembleFor("model-a");
  const thinking = forA.flatMap((m: any) => (m.role === "assistant" ? m.content : [])).filter((b: any) => b.type === "thinking");
  assert.deepEqual(thinking.map((b: any) => b.thinkingSignature), ["SIG-a"]);
  const carrier = forA.find((m: any) => m.role === "assistant" && m.content.some((b: any) => b.type === "thinking"));
  assert.deepEqual([carrier.provider, carrier.model], ["anthropic", "model-a"], "stamped for the host's replay rule");
  assert.equal(forA.filter((m: any) => m.role === "toolResult").length, 2, "tool pairs kept");
  const forB = await assembleFor("model-b");
  assert.ok(JSON.stringify(forB).includes("SIG-b"));
  assert.ok(!JSON.stringify(forB).includes("SIG-a"));
});

test("ingest, ingestBatch, afterTurn store each message once; assemble returns them", async () => {
  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("unit"), sessionId: "s1" };
  const a = userMsg("hello there"), b = assistantMsg("hi!");
  assert.deepEqual(await engine.ingest({ ...ids, message: a }), { ingested: true });
  assert.deepEqual(await engine.ingest({ ...ids, message: a }), { ingested: false });
  assert.deepEqual(await engine.ingestBatch({ ...ids, messages: [a, b] }), { ingestedCount: 1 });
  await engine.afterTurn({ ...ids, messages: [a, b, userMsg("more"), assistantMsg("sure")], prePromptMessageCount: 2, tokenBudget: 100000 });
  const out = await engine.assemble({ ...ids, messages: [], tokenBudget: 100000 });
  assert.deepEqual(out.messages.map((m: any) => m.role), ["user", "assistant", "user", "assistant"]);
  assert.ok(out.estimatedTokens > 0);
  assert.equal(out.systemPromptAddition, undefined, "nothing summarized yet");
});

test("afterTurn and commitTurn forward the host's model usage, cache reads and writes included", async () => {
  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("usage"), sessionId: "s1" };
  const used = (input: number, cacheRead: number, cacheWrite: number) => ({
    ...assistantMsg(`answer ${input}`),
    usage: { input, output: 7, cacheRead, cacheWrite, totalTokens: input + 7 + cacheRead + cacheWrite, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
  });
  // Zeros (an assembled message, a provider without counts) report nothing.
  assert.equal(turnUsage([userMsg("q"), assistantMsg("a")]), undefined);
  const host = async () => (await lcm("GET", "/v1/tenant/usage")).body.host;
  const before = await host();
  // Two model calls in one turn (a tool call, then the answer): summed.
  await engine.afterTurn({ ...ids, messages: [userMsg("go"), used(11, 3_001, 50), used(13, 3_003, 0)], prePromptMessageCount: 0, tokenBudget: 100000 });
  await engine.commitTurn({ ...ids, advancementKey: unique("adv"), messages: [userMsg("next"), used(17, 4_000, 9)] });
  const after = await host();
  assert.equal(after.turns - before.turns, 2);
  assert.equal(after.input_tokens - before.input_tokens, 11 + 13 + 17);
  assert.equal(after.output_tokens - before.output_tokens, 21);
  assert.equal(after.cache_read_tokens - before.cache_read_tokens, 3_001 + 3_003 + 4_000);
  assert.equal(after.cache_write_tokens - before.cache_write_tokens, 59);
});

test("assemble of an unknown session passes the host's messages through", async () => {
  const engine = createLcmEngine(config());
  const host = [userMsg("only the host knows this")];
  const out = await engine.assemble({ sessionKey: unique("new"), messages: host, tokenBudget: 1000 });
  assert.deepEqual(out.messages, host);
});

test("commitTurn: committed once, duplicate on retry", async () => {
  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("commit"), sessionId: "s1" };
  const messages = [userMsg("q"), assistantMsg("a")];
  assert.deepEqual(await engine.commitTurn({ ...ids, advancementKey: "t1", messages }), { status: "committed" });
  assert.deepEqual(await engine.commitTurn({ ...ids, advancementKey: "t1", messages }), { status: "duplicate" });
  const status = await lcm("GET", `/v1/conversations/${encodeURIComponent("openclaw:" + ids.sessionKey)}/status`);
  assert.equal(status.body.messages, 2);
});

test("a server error is reported with its code and not retried", async () => {
  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("bad"), sessionId: "s1" };
  const many = Array.from({ length: 1001 }, (_, i) => userMsg(`m${i}`)); // over LCM_MAX_BATCH_MESSAGES: 413
  await assert.rejects(
    engine.ingestBatch({ ...ids, messages: many }),
    (e: any) => e instanceof LcmError && e.status === 413 && /too_large/.test(e.message),
  );
  // NUL characters cannot be stored faithfully: 400 invalid_text.
  await assert.rejects(engine.ingest({ ...ids, message: userMsg("bad\u0000text") }), (e: any) => e.status === 400 && /invalid_text/.test(e.message));
});

test("a server that is down fails fast with a clear error", async () => {
  const engine = createLcmEngine(resolveConfig({ baseUrl: "http://127.0.0.1:9", apiKey: "k", timeoutMs: 2000 }));
  const started = Date.now();
  await assert.rejects(engine.assemble({ sessionKey: "x", messages: [], tokenBudget: 10 }), /lcm-server unreachable at http:\/\/127\.0\.0\.1:9/);
  assert.ok(Date.now() - started < 2000);
});

test("a server that hangs fails within the timeout", async () => {
  const sockets: any[] = [];
  const silent = createServer((socket) => sockets.push(socket)); // accepts, never answers
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const port = (silent.address() as any).port;
  try {
    const engine = createLcmEngine(resolveConfig({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "k", timeoutMs: 300 }));
    const started = Date.now();
    await assert.rejects(engine.commitTurn({ sessionKey: "x", advancementKey: "k", messages: [userMsg("q")] }), (e: any) => e.code === "timeout" && /timed out after 300 ms/.test(e.message));
    assert.ok(Date.now() - started < 2000);
  } finally {
    sockets.forEach((s) => s.destroy());
    silent.close();
  }
});

test("tools call the server scoped to the session family", async () => {
  const ids = { sessionKey: unique("tools"), sessionId: "s1" };
  const engine = createLcmEngine(config());
  await engine.ingestBatch({ ...ids, messages: [userMsg("the secret word is pelican"), assistantMsg("noted")] });
  const tools = Object.fromEntries(createLcmTools(config(), ids).map((t) => [t.name, t]));
  const found = await tools.lcm_grep.execute("c1", { pattern: "pelican" });
  assert.equal((found.details as any).matches.length, 1);
  const other = createLcmTools(config(), { sessionKey: unique("other") })[0];
  await assert.rejects(other.execute("c2", { pattern: "pelican" }), (e: any) => e.status === 404, "another family sees nothing");
  await assert.rejects(tools.lcm_describe.execute("c3", { id: "sum_0000000000000000" }), (e: any) => e.status === 404);
  await assert.rejects(tools.lcm_expand.execute("c4", { summary_ids: ["sum_0000000000000000"] }), (e: any) => e.status === 404);
  const answer = await tools.lcm_expand_query.execute("c5", { prompt: "what is the secret word?", query: "pelican" });
  assert.match(JSON.stringify(answer.details), /pelican/);
  assert.equal((answer.details as any).conversations[0].status, "answered");
  assert.equal((answer.details as any).source_conversation_ids.length, 1);
  const wide = await tools.lcm_expand_query.execute("c6", { prompt: "secret word?", query: "pelican", all_conversations: true, timeout_ms: 5_000 });
  assert.equal((wide.details as any).timeout_ms, 5_000);
  assert.ok((wide.details as any).conversations[0].session_key.endsWith(ids.sessionKey));
  // file_ids reach the server as a files search: a file the family does not hold is named, nothing read.
  const inFile = await tools.lcm_grep.execute("c7", { pattern: "pelican", file_ids: ["file_0123456789abcdef"] });
  assert.deepEqual((inFile.details as any).matches, []);
  assert.deepEqual((inFile.details as any).notes, ["not in this scope: file_0123456789abcdef"]);
  await assert.rejects(
    tools.lcm_grep.execute("c8", { pattern: "pelican", scope: "messages", file_ids: ["file_0123456789abcdef"] }),
    (e: any) => e.status === 400,
  );
});
