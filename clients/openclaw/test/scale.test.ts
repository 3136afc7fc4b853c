/**
 * The plugin at gateway scale, against a real lcm-server: constant cost per
 * turn, the circuit breaker, faithful messages and times, host signals, one
 * assemble per turn, the /lcm command.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { CircuitBreaker } from "../src/breaker.ts";
import { LcmClient } from "../src/client.ts";
import { runLcmCommand } from "../src/commands.ts";
import { createLcmEngine, modelSignals, PluginShared, RecentAssembles, recallTools } from "../src/engine.ts";
import { toLcm } from "../src/messages.ts";
import { PAGE_MESSAGES } from "../src/transcript.ts";
import { assistantMsg, config, lcm, recordingClient, resettingProxy, switchableProxy, toolResultMsg, unique, userMsg } from "./helpers.ts";

const statusOf = async (key: string) => (await lcm("GET", `/v1/conversations/${encodeURIComponent("openclaw:" + key)}/status`)).body;

/**
 * A host transcript behind OpenClaw's cursor contract: pages oldest to newest,
 * the cursor names the last message returned, a `generation` change (a
 * rewritten transcript) answers `reset` with a fresh cursor.
 */
function fakeHost() {
  const host = { messages: [] as any[], generation: 1, reads: 0 };
  const read = async (params: any) => {
    host.reads++;
    let after = -1;
    if (params.cursor !== undefined) {
      const [generation, last] = String(params.cursor).split(":").map(Number);
      if (generation !== host.generation || last >= host.messages.length) return { kind: "reset" as const, cursor: `${host.generation}:-1`, reason: "generation_mismatch" };
      after = last;
    }
    const slice = host.messages.slice(after + 1, after + 1 + params.maxMessages);
    const last = after + slice.length;
    return { kind: "page" as const, cursor: `${host.generation}:${last}`, entries: slice.map((message) => ({ message })), hasMore: last < host.messages.length - 1 };
  };
  return { host, read };
}

function turnOf(i: number) {
  return [userMsg(`question ${i}: ${"context ".repeat(20)}`), assistantMsg(`answer ${i}`)];
}

test("bootstrap sends only what the server lacks: constant requests and bytes per turn", async () => {
  const { host, read } = fakeHost();
  const shared = new PluginShared(config());
  shared.reader = Promise.resolve(read as any);
  const ids = { sessionKey: unique("cursor"), sessionId: "s1" };
  const client = new LcmClient(config(), shared.breaker);
  const engine = createLcmEngine(config(), client, shared);
  for (let i = 0; i < 700; i++) host.messages.push(...turnOf(i));

  const first = await engine.bootstrap({ ...ids, sessionFile: "agent:main:x" });
  assert.equal(first.importedMessages, 1400);
  assert.equal(client.stats.requests, 1 + Math.ceil(1400 / PAGE_MESSAGES), "one GET, then a POST a page");
  assert.equal((await statusOf(ids.sessionKey)).messages, 1400);

  // Nothing new: no request at all.
  const before = { ...client.stats };
  assert.equal((await engine.bootstrap({ ...ids, sessionFile: "agent:main:x" })).importedMessages, 0);
  assert.equal(client.stats.requests, before.requests);

  // One new turn: one POST holding just it.
  host.messages.push(...turnOf(700));
  await engine.bootstrap({ ...ids, sessionFile: "agent:main:x" });
  assert.equal(client.stats.requests, before.requests + 1);
  const oneTurnBytes = client.stats.bytesSent - before.bytesSent;
  assert.ok(oneTurnBytes < 2_000, `one turn cost ${oneTurnBytes} bytes`);

  // A gateway restart (fresh memory): the server's cursor, one GET and nothing else.
  const restarted = new PluginShared(config());
  restarted.reader = Promise.resolve(read as any);
  const client2 = new LcmClient(config(), restarted.breaker);
  const engine2 = createLcmEngine(config(), client2, restarted);
  assert.equal((await engine2.bootstrap({ ...ids, sessionFile: "agent:main:x" })).importedMessages, 0);
  assert.equal(client2.stats.requests, 1);
  const cursor = await lcm("GET", `/v1/conversations/${encodeURIComponent("openclaw:" + ids.sessionKey)}/host-cursor?session_id=s1`);
  assert.equal(cursor.body.host_cursor, "1:1401");

  // A rewritten transcript: reset, read again, nothing stored twice.
  host.generation = 2;
  host.messages.push(...turnOf(701));
  const reset = await engine2.bootstrap({ ...ids, sessionFile: "agent:main:x" });
  assert.equal(reset.importedMessages, 2, "only the new turn is new to the server");
  assert.match(reset.reason ?? "", /reset/);
  assert.equal((await statusOf(ids.sessionKey)).messages, 1404);
});

test("the circuit breaker: a hung server costs one timeout per cool-down, then one probe", async () => {
  const base = config();
  const proxy = await switchableProxy(base.baseUrl);
  try {
    const cfg = config({ baseUrl: proxy.url, timeoutMs: 400, breakerCooldownMs: 1500 });
    const shared = new PluginShared(cfg);
    const engine = createLcmEngine(cfg, undefined, shared);
    const ids = { sessionKey: unique("breaker"), sessionId: "s1" };
    assert.equal((await engine.commitTurn({ ...ids, advancementKey: "t0", messages: turnOf(0) })).status, "committed");

    proxy.mode = "hang";
    let started = Date.now();
    await assert.rejects(engine.commitTurn({ ...ids, advancementKey: "t1", messages: turnOf(1) }), (e: any) => e.code === "timeout");
    const first = Date.now() - started;
    assert.ok(first >= 400 && first < 1200, `first call waited ${first} ms`);
    assert.equal(shared.breaker.state, "open");

    // A whole turn's calls while open: each fails at once.
    started = Date.now();
    await assert.rejects(engine.assemble({ ...ids, messages: [], tokenBudget: 1000 }), (e: any) => e.code === "circuit_open");
    await assert.rejects(engine.commitTurn({ ...ids, advancementKey: "t1", messages: turnOf(1) }), (e: any) => e.code === "circuit_open" && /circuit open \(timed out/.test(e.message));
    assert.ok(Date.now() - started < 100, `open calls took ${Date.now() - started} ms`);

    // After the cool-down one probe goes through (and hangs); the others still fail fast.
    await new Promise((r) => setTimeout(r, 1600));
    assert.equal(shared.breaker.state, "half-open");
    const probe = engine.commitTurn({ ...ids, advancementKey: "t1", messages: turnOf(1) });
    started = Date.now();
    await assert.rejects(engine.assemble({ ...ids, messages: [], tokenBudget: 1000 }), (e: any) => e.code === "circuit_open");
    assert.ok(Date.now() - started < 100);
    await assert.rejects(probe, (e: any) => e.code === "timeout");
    assert.equal(shared.breaker.state, "open");

    // The server is back: after the cool-down the probe succeeds and closes the breaker;
    // the commit the host kept and replays is stored once.
    proxy.mode = "forward";
    await new Promise((r) => setTimeout(r, 1600));
    assert.equal((await engine.commitTurn({ ...ids, advancementKey: "t1", messages: turnOf(1) })).status, "committed");
    assert.equal(shared.breaker.state, "closed");
    assert.equal((await engine.commitTurn({ ...ids, advancementKey: "t1", messages: turnOf(1) })).status, "duplicate");
    assert.equal((await statusOf(ids.sessionKey)).messages, 4);
  } finally {
    proxy.close();
  }
});

test("breaker: an HTTP error does not open it; a host abort releases the probe", async () => {
  let now = 0;
  const breaker = new CircuitBreaker(1000, () => now);
  breaker.succeeded(breaker.admit());
  breaker.failed(breaker.admit(), "refused");
  assert.throws(() => breaker.admit(), /circuit open \(refused\)/);
  now = 1000;
  const probe = breaker.admit();
  assert.equal(probe.probe, true);
  assert.throws(() => breaker.admit(), /circuit open/, "one probe at a time");
  breaker.released(probe);
  breaker.succeeded(breaker.admit());
  assert.equal(breaker.state, "closed");
  const engine = createLcmEngine(config());
  await assert.rejects(engine.ingest({ sessionKey: unique("nul"), message: userMsg("bad\u0000") }), (e: any) => e.status === 400);
  await engine.ingest({ sessionKey: unique("ok"), message: userMsg("fine") }); // still closed
});

test("entries the host keeps out of context are never stored; tool pairs stay whole", async () => {
  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("excluded"), sessionId: "s1" };
  const call = { id: "toolu_x1", name: "tool_call", arguments: { id: "lcm_grep", args: { pattern: "x" } } };
  const nested = { role: "custom", customType: "openclaw.nested-tool.v1", excludeFromContext: true, content: "", timestamp: Date.now() };
  const hidden = { role: "custom", customType: "note", excludeFromContext: true, content: "internal note", timestamp: Date.now() };
  assert.equal(toLcm(nested), null);
  const messages = [userMsg("search please"), assistantMsg("searching", call), nested, hidden, toolResultMsg("toolu_x1", "tool_call", "no matches"), assistantMsg("nothing found")];
  assert.equal((await engine.commitTurn({ ...ids, advancementKey: "k1", messages })).status, "committed");
  assert.equal((await statusOf(ids.sessionKey)).messages, 4);
  const out = await engine.assemble({ ...ids, messages: [], tokenBudget: 100_000 });
  assert.deepEqual(out.messages.map((m: any) => m.role), ["user", "assistant", "toolResult", "assistant"]);
  assert.doesNotMatch(JSON.stringify(out.messages), /internal note/);
});

test("assembled messages keep their original times", async () => {
  const engine = createLcmEngine(config());
  const ids = { sessionKey: unique("times"), sessionId: "s1" };
  const day = Date.UTC(2026, 0, 15, 9, 30);
  const messages = [
    { role: "user", content: "an old question", timestamp: day },
    { ...assistantMsg("an old answer"), timestamp: day + 60_000 },
  ];
  await engine.ingestBatch({ ...ids, messages });
  const out = await engine.assemble({ ...ids, messages: [], tokenBudget: 10_000 });
  assert.deepEqual(out.messages.map((m: any) => m.timestamp), [day, day + 60_000]);
});

test("one assemble request per turn: the second identical call is answered from the first", async () => {
  const { client, calls } = await recordingClient(config());
  const engine = createLcmEngine(config(), client);
  const ids = { sessionKey: unique("once"), sessionId: "s1" };
  await engine.ingestBatch({ ...ids, messages: turnOf(1) });
  const ask = { ...ids, messages: [], tokenBudget: 10_000, availableTools: new Set(["lcm_grep"]) };
  const [a, b] = [await engine.assemble(ask), await engine.assemble(ask)];
  assert.deepEqual(a, b);
  assert.equal(calls.filter((c) => c.path.endsWith("/assemble")).length, 1);
  await engine.ingestBatch({ ...ids, messages: turnOf(2) }); // a write: the next assemble asks again
  assert.equal((await engine.assemble(ask)).messages.length, 4);
  await engine.assemble({ ...ask, tokenBudget: 9_999 }); // another request: asked
  assert.equal(calls.filter((c) => c.path.endsWith("/assemble")).length, 3);
  let now = 0;
  const memo = new RecentAssembles(1000, () => now);
  let loads = 0;
  const load = async () => ({ n: ++loads }) as any;
  await memo.get("s", "b", load);
  now = 1001;
  await memo.get("s", "b", load);
  assert.equal(loads, 2, "kept for a short while only");
});

test("the recall prompt names the deferred route under tool search", async () => {
  // OpenClaw's two asks under tool search: the whole catalog, then what the model sees.
  const catalog = recallTools(new Set(["read", "tool_search", "tool_describe", "tool_call", "lcm_grep", "lcm_expand", "web_fetch"]));
  const visible = recallTools(new Set(["read", "tool_search", "tool_describe", "tool_call"]));
  assert.deepEqual(catalog, { available_tools: null, tool_caller: "tool_call" });
  assert.deepEqual(visible, catalog, "the same request: answered once");
  // Tool search off: the recall tools the run has, whatever else it has.
  assert.deepEqual(recallTools(new Set(["read", "lcm_grep", "lcm_expand", "web_fetch"])), { available_tools: ["lcm_grep", "lcm_expand"] });
  assert.deepEqual(recallTools(new Set(["read", "lcm_grep", "lcm_expand"])), { available_tools: ["lcm_grep", "lcm_expand"] });
  assert.deepEqual(recallTools(undefined), { available_tools: null });
});

test("host signals: the model names a model_overrides rule, overflow recovery compacts under the budget", async () => {
  const patched = await lcm("PATCH", "/v1/tenant/settings", { model_overrides: [{ model: "plugin-test-tiny-*", context_threshold: 0.1 }] });
  assert.equal(patched.status, 200, JSON.stringify(patched.body));
  const settings = { model: { requested: "plugin-test-tiny-1", resolved: "plugin-test-tiny-1", provider: "fake" }, limits: { promptTokenBudget: 20_000, maxOutputTokens: 4_000 }, diagnostics: {} };
  assert.deepEqual(modelSignals(settings), { model: "plugin-test-tiny-1", context_window: 24_000 });
  const { client, calls } = await recordingClient(config({ compactWaitMs: 30_000 }));
  const engine = createLcmEngine(config({ compactWaitMs: 30_000 }), client);
  const ids = { sessionKey: unique("signals"), sessionId: "s1" };
  for (let i = 0; i < 40; i++) {
    await engine.commitTurn({ ...ids, advancementKey: `t${i}`, messages: turnOf(i), runtimeSettings: settings, runtimeContext: { currentTokenCount: 900 + i } });
  }
  const commit = calls.find((c) => c.path.endsWith("/commits"))!;
  assert.equal(commit.body.model, "plugin-test-tiny-1");
  assert.equal(commit.body.current_token_count, 900);
  assert.equal(commit.answer.threshold_tokens, 2_000, "the rule's threshold (10% of 20,000), not the default");

  await lcm("PATCH", "/v1/tenant/settings", { model_overrides: [] });

  // Overflow: the provider refused a prompt of stored context + 300 tokens of
  // the host's own (system prompt, tools) at a 2,000-token budget.
  const over = { sessionKey: unique("overflow"), sessionId: "s1" };
  for (let i = 0; i < 40; i++) await engine.commitTurn({ ...over, advancementKey: `o${i}`, messages: turnOf(i) });
  const before = await statusOf(over.sessionKey);
  const live = before.context_tokens + 300;
  assert.ok(live > 2_000, `stored ${before.context_tokens}`);
  const recovered = await engine.compact({ ...over, force: true, tokenBudget: 2_000, currentTokenCount: live, compactionTarget: "budget", runtimeContext: { trigger: "overflow" } } as any);
  const reported = calls.find((c) => c.path.endsWith("/turns"))!;
  assert.equal(reported.body.overflow, true);
  assert.equal(reported.body.current_token_count, live);
  assert.equal(reported.answer.target_tokens, 1_500 - 300, "the threshold less the host's overhead");
  assert.equal(recovered.ok, true, JSON.stringify(recovered));
  // The overflow debt may already be swept by the server's worker when /compact runs.
  assert.ok(recovered.result.tokensBefore <= before.context_tokens);
  assert.ok((await statusOf(over.sessionKey)).context_tokens <= reported.answer.target_tokens);
  assert.ok(recovered.result.tokensAfter <= reported.answer.target_tokens, JSON.stringify([recovered, reported.answer]));
  assert.ok(recovered.result.tokensAfter + 300 < 2_000, "the retried prompt fits");
});

test("/lcm status, compact and doctor answer in text", async () => {
  const cfg = config();
  const engine = createLcmEngine(cfg);
  const ctx = { sessionKey: unique("cmd"), sessionId: "s1" };
  const client = new LcmClient(cfg);
  assert.match((await runLcmCommand(cfg, client, { ...ctx, args: "status" })).text, /stored nothing/);
  for (let i = 0; i < 5; i++) await engine.commitTurn({ ...ctx, advancementKey: `c${i}`, messages: turnOf(i) });
  const status = (await runLcmCommand(cfg, client, { ...ctx, args: "status" })).text;
  assert.match(status, /messages stored: 10/);
  assert.match(status, /compaction owed: (none|\w+ debt, (pending|running|failed))/);
  assert.match((await runLcmCommand(cfg, client, { ...ctx, args: "compact" })).text, /lcm compaction \w+: \d+ -> \d+ tokens/);
  assert.match((await runLcmCommand(cfg, client, { ...ctx, args: "doctor" })).text, /0 broken, 0 truncated, 0 degraded summaries \(healthy\)/);
  assert.match((await runLcmCommand(cfg, client, { ...ctx, args: "frobnicate" })).text, /Usage: \/lcm status/);
  assert.match((await runLcmCommand(cfg, client, { args: "status" })).text, /needs a session/);
});

test("a connection reset before any answer is sent again once; a second reset opens the breaker", async () => {
  const proxy = await resettingProxy(config().baseUrl, 1);
  try {
    const cfg = config({ baseUrl: proxy.url });
    const shared = new PluginShared(cfg);
    const engine = createLcmEngine(cfg, undefined, shared);
    const ids = { sessionKey: unique("reset"), sessionId: "s1" };
    assert.equal((await engine.commitTurn({ ...ids, advancementKey: "r1", messages: turnOf(1) })).status, "committed");
    assert.equal(proxy.state.connections, 2, "reset once, then a new connection");
    assert.equal(shared.breaker.state, "closed");
    // Reset twice (a new origin, so no kept-alive connection skips the resets): not a stale connection.
    const twice = await resettingProxy(config().baseUrl, 2);
    try {
      const other = new PluginShared(cfg);
      const engine2 = createLcmEngine(config({ baseUrl: twice.url }), undefined, other);
      await assert.rejects(engine2.commitTurn({ ...ids, advancementKey: "r2", messages: turnOf(2) }), (e: any) => e.code === "unreachable");
      assert.equal(twice.state.connections, 2);
      assert.equal(other.breaker.state, "open");
    } finally {
      twice.close();
    }
    assert.equal((await statusOf(ids.sessionKey)).messages, 2, "nothing stored by the failed commit");
  } finally {
    proxy.close();
  }
});

test("an assemble asked while a write is in flight is not reused after the write", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const asked: string[] = [];
  class HeldCommits extends LcmClient {
    override async request<T>(method: string, path: string, body?: unknown, options?: any): Promise<T> {
      if (path.endsWith("/assemble")) asked.push(path);
      if (path.endsWith("/commits")) await gate; // the commit is in flight until released
      return await super.request<T>(method, path, body, options);
    }
  }
  const engine = createLcmEngine(config(), new HeldCommits(config()));
  const ids = { sessionKey: unique("race"), sessionId: "s1" };
  await engine.ingestBatch({ ...ids, messages: turnOf(1) });
  const ask = { ...ids, messages: [], tokenBudget: 10_000 };
  const commit = engine.commitTurn({ ...ids, advancementKey: "k", messages: turnOf(2) });
  const during = await engine.assemble(ask); // may not see the commit
  assert.equal(during.messages.length, 2);
  release();
  await commit;
  const after = await engine.assemble(ask);
  assert.equal(after.messages.length, 4, "the commit is seen: the answer from before it was dropped");
  assert.equal(asked.length, 2);
});
