/**
 * What a turn costs while lcm-server hangs (run by `python -m bench plugin`).
 *
 * The plugin talks to lcm-server through a proxy that accepts connections and
 * never answers. Each turn makes a gateway turn's calls through OpenClaw's
 * host functions (bootstrap, assemble twice, commit), each failure caught as
 * OpenClaw's per-call fallback does; two turns in a row, at the plugin's
 * default timeout unless told otherwise.
 *
 * argv: plugin directory, lcm URL, lcm key, timeout ms. Prints one JSON line.
 */
import { performance } from "node:perf_hooks";
import { assembleHarnessContextEngine, bootstrapHarnessContextEngine } from "openclaw/plugin-sdk/agent-harness-runtime";
import * as transcript from "openclaw/plugin-sdk/session-transcript-runtime";
import { switchableProxy } from "../test/proxies.ts";

const [pluginDir, baseUrl, apiKey, timeoutArg] = process.argv.slice(2);
const plugin = await import(`${pluginDir}/index.ts`);
const proxy = await switchableProxy(baseUrl);
const cfg = plugin.resolveConfig({ baseUrl: proxy.url, apiKey, timeoutMs: Number(timeoutArg), sessionKeyPrefix: "hung:" });
const ids = { agentId: "main", sessionKey: `hung-${process.pid}`, sessionId: `hung-${process.pid}` };
const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };

async function quietly(call: () => Promise<unknown>) {
  try {
    await call();
  } catch {
    // OpenClaw falls back for this call and goes on with the turn
  }
}

async function turn(engine: any, i: number): Promise<number> {
  const question = { role: "user", content: `question ${i}`, timestamp: Date.now() };
  await transcript.appendSessionTranscriptMessageByIdentity({ ...ids, message: question });
  const began = performance.now();
  const base = { contextEngine: engine, sessionId: ids.sessionId, sessionKey: ids.sessionKey, warn: () => {} };
  await quietly(() => bootstrapHarnessContextEngine({ ...base, hadSessionFile: true, sessionFile: `agent:main:${ids.sessionKey}`, sessionTarget: ids } as any));
  const ask = { ...base, agentId: "main", messages: [question], tokenBudget: 100_000, modelId: "fake-model" };
  await quietly(() => assembleHarnessContextEngine(ask as any));
  await quietly(() => assembleHarnessContextEngine(ask as any));
  const reply = { role: "assistant", content: [{ type: "text", text: `answer ${i}` }], api: "anthropic-messages", provider: "fake", model: "fake-model", usage, stopReason: "stop", timestamp: Date.now() };
  await quietly(() => engine.commitTurn({ ...ids, advancementKey: `${ids.sessionKey}:${i}`, messages: [question, reply] }));
  return (performance.now() - began) / 1000;
}

const engine = () => plugin.createLcmEngine(cfg, ...(plugin.PluginShared ? [undefined, shared] : []));
const shared = plugin.PluginShared ? new plugin.PluginShared(cfg) : undefined;
await turn(engine(), 0); // the server up: the session exists
proxy.mode = "hang";
const seconds = [await turn(engine(), 1), await turn(engine(), 2)];
proxy.close();
console.log(JSON.stringify({ timeout_ms: cfg.timeoutMs, turn_seconds: seconds }));
process.exit(0);
