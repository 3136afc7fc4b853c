/**
 * Per-turn cost of the plugin, driven through OpenClaw's host functions over a
 * real OpenClaw SQLite session store (run by `python -m bench plugin`).
 *
 * For each size the host transcript is filled with that many messages
 * (OpenClaw's own append API), the engine bootstraps once (the import, not
 * timed), then each timed turn does what a gateway turn does: the host appends
 * the user message, bootstrap, assemble twice (OpenClaw asks twice), the host
 * appends the reply, commitTurn, then the host's turn finalization (afterTurn).
 * Every request's bytes and round-trip time are counted by wrapping `fetch`.
 * The legacy slot runs the same turns with OpenClaw's legacy engine
 * (pass-through; reproduced here since OpenClaw does not export it), whose
 * cost is the host's read of the session's visible messages.
 *
 * argv: plugin directory, lcm URL, lcm key, sizes (comma-separated), turns,
 * session prefix. Prints one JSON line per size.
 */
import { performance } from "node:perf_hooks";
import { assembleHarnessContextEngine, bootstrapHarnessContextEngine, finalizeHarnessContextEngineTurn } from "openclaw/plugin-sdk/agent-harness-runtime";
import * as transcript from "openclaw/plugin-sdk/session-transcript-runtime";

const [pluginDir, baseUrl, apiKey, sizesArg, turnsArg, prefix] = process.argv.slice(2);
const sizes = sizesArg.split(",").map(Number);
const turns = Number(turnsArg);
const plugin = await import(`${pluginDir}/index.ts`);

const wire = { requests: 0, bytes: 0, ms: 0, byCall: {} as Record<string, number> };
const realFetch = globalThis.fetch;
globalThis.fetch = (async (url: any, init: any = {}) => {
  const began = performance.now();
  wire.requests += 1;
  wire.bytes += typeof init.body === "string" ? Buffer.byteLength(init.body) : 0;
  const call = `${init.method ?? "GET"} ${String(url).split("?")[0].split("/").pop()}`;
  try {
    const response = await realFetch(url, init);
    const text = await response.text();
    return new Response(text, { status: response.status, headers: response.headers });
  } finally {
    const ms = performance.now() - began;
    wire.ms += ms;
    wire.byCall[call] = (wire.byCall[call] ?? 0) + ms;
  }
}) as typeof fetch;

/** Wait until the server owes the conversation no compaction (the steady state a gateway keeps). */
async function settled(key: string) {
  const deadline = Date.now() + 600_000;
  for (;;) {
    const response = await realFetch(`${baseUrl}/v1/conversations/${encodeURIComponent(key)}/status`, { headers: { authorization: `Bearer ${apiKey}` } });
    const status: any = await response.json();
    if (!status.debt || !["pending", "running"].includes(status.debt.status)) return status;
    if (Date.now() > deadline) throw new Error(`compaction of ${key} did not settle`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

let clock = Date.UTC(2026, 0, 1);
const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
function message(i: number) {
  const words = `about the billing migration, step ${i}: ` + "the ledger rows move to the new schema ".repeat(6);
  return i % 2 === 0
    ? { role: "user", content: `question ${i} ${words}`, timestamp: (clock += 1000) }
    : { role: "assistant", content: [{ type: "text", text: `answer ${i} ${words}` }], api: "anthropic-messages", provider: "fake", model: "fake-model", usage, stopReason: "stop", timestamp: (clock += 1000) };
}

const legacy = {
  info: { id: "legacy", name: "Legacy Context Engine", version: "1.0.0" },
  async ingest() {
    return { ingested: false };
  },
  async assemble(params: { messages: unknown[] }) {
    return { messages: params.messages, estimatedTokens: 0 };
  },
  async compact() {
    return { ok: true, compacted: false };
  },
};

async function visible(ids: Record<string, string>) {
  return (await transcript.readVisibleSessionTranscriptMessageEntries(ids)).map((e: any) => e.message);
}

function median(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function oneTurn(engine: any, ids: Record<string, string>, i: number) {
  await transcript.appendSessionTranscriptMessageByIdentity({ ...ids, message: message(i) });
  const start = { ...wire, byCall: { ...wire.byCall } };
  const began = performance.now();
  const base = { contextEngine: engine, sessionId: ids.sessionId, sessionKey: ids.sessionKey, warn: () => {} };
  await bootstrapHarnessContextEngine({ ...base, hadSessionFile: true, sessionFile: `agent:main:${ids.sessionKey}`, sessionTarget: ids } as any);
  const hostRead = performance.now();
  const messages = await visible(ids); // the host's pipeline messages (the legacy context)
  const hostReadMs = performance.now() - hostRead;
  const ask = { ...base, agentId: "main", messages, tokenBudget: 100_000, modelId: "fake-model", availableTools: new Set(["lcm_grep"]) };
  await assembleHarnessContextEngine(ask as any);
  await assembleHarnessContextEngine(ask as any);
  const reply = message(i + 1);
  await transcript.appendSessionTranscriptMessageByIdentity({ ...ids, message: reply });
  if (typeof engine.commitTurn === "function") {
    await engine.commitTurn({ ...ids, advancementKey: `${ids.sessionKey}:${i}`, messages: [messages[messages.length - 1], reply] });
  }
  await finalizeHarnessContextEngineTurn({
    ...base, promptError: false, aborted: false, yieldAborted: false, sessionIdUsed: ids.sessionId, sessionFile: "",
    messagesSnapshot: [...messages, reply], prePromptMessageCount: messages.length - 1, tokenBudget: 100_000,
  } as any);
  const totalMs = performance.now() - began - hostReadMs;
  const serverMs = wire.ms - start.ms;
  const byCall = Object.fromEntries(Object.entries(wire.byCall).map(([k, v]) => [k, v - (start.byCall[k] ?? 0)]));
  return { bytes: wire.bytes - start.bytes, requests: wire.requests - start.requests, serverMs, pluginMs: totalMs - serverMs, hostReadMs, byCall };
}

for (const size of sizes) {
  const ids = { agentId: "main", sessionKey: `${prefix}-${size}-${process.pid}`, sessionId: `bench-${size}-${process.pid}` };
  for (let i = 0; i < size; i++) await transcript.appendSessionTranscriptMessageByIdentity({ ...ids, message: message(i) });
  const cfg = plugin.resolveConfig({ baseUrl, apiKey, timeoutMs: 120_000, sessionKeyPrefix: `${prefix}:` });
  const engine = plugin.createLcmEngine(cfg);
  await bootstrapHarnessContextEngine({ contextEngine: engine, hadSessionFile: true, sessionId: ids.sessionId, sessionKey: ids.sessionKey, sessionFile: `agent:main:${ids.sessionKey}`, sessionTarget: ids, warn: () => {} } as any);
  // One turn records the threshold debt the import left; the timed turns
  // start once the server has compacted it, as a gateway's workers keep up.
  await oneTurn(engine, ids, size + 4 * turns);
  const status = await settled(`${prefix}:${ids.sessionKey}`);
  const lcm = [];
  const old = [];
  for (let t = 0; t < turns; t++) {
    lcm.push(await oneTurn(engine, ids, size + 2 * t));
    old.push(await oneTurn(legacy, ids, size + 2 * turns + 2 * t));
  }
  await engine.dispose?.();
  const stats = (rows: any[]) => ({
    bytes: median(rows.map((r) => r.bytes)),
    requests: median(rows.map((r) => r.requests)),
    server_ms: median(rows.map((r) => r.serverMs)),
    plugin_ms: median(rows.map((r) => r.pluginMs)),
    host_read_ms: median(rows.map((r) => r.hostReadMs)),
    by_call_ms: Object.fromEntries(Object.keys(rows[0].byCall).map((k) => [k, median(rows.map((r) => r.byCall[k] ?? 0))])),
  });
  console.log(JSON.stringify({ size, turns, context_tokens: status.context_tokens, summaries: status.summaries, lcm: stats(lcm), legacy: stats(old) }));
}
