/**
 * The engine driven through OpenClaw's own host-side lifecycle functions
 * (openclaw/plugin-sdk/agent-harness-runtime), against a real lcm-server.
 */
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  assembleHarnessContextEngine,
  bootstrapHarnessContextEngine,
  compactContextEngineWithSafetyTimeout,
  finalizeHarnessContextEngineTurn,
  runHarnessContextEngineMaintenance,
} from "openclaw/plugin-sdk/agent-harness-runtime";
import { createLcmEngine } from "../src/engine.ts";
import { assistantMsg, config, lcm, recordingClient, toolResultMsg, unique, userMsg, waitFor } from "./helpers.ts";

const BUDGET = 3000;
const statusOf = async (key: string) => (await lcm("GET", `/v1/conversations/${encodeURIComponent("openclaw:" + key)}/status?token_budget=${BUDGET}`)).body;

function turnMessages(i: number) {
  if (i % 5 === 0) {
    const call = { id: `toolu_${i}`, name: "read_file", arguments: { path: `/src/module_${i}.py` } };
    return [userMsg(`turn ${i}: open module ${i}`), assistantMsg("reading it", call), toolResultMsg(call.id, "read_file", `def f${i}(): return ${i}`), assistantMsg(`module ${i} defines f${i}`)];
  }
  return [userMsg(`turn ${i}: the codeword for this turn is kestrel-${i}`), assistantMsg(`noted kestrel-${i}`)];
}

function assertToolPairs(messages: any[]) {
  const open = new Set<string>();
  for (const m of messages) {
    if (m.role === "assistant") for (const b of m.content) if (b.type === "toolCall") open.add(b.id);
    if (m.role === "toolResult") assert.ok(open.delete(m.toolCallId), `result ${m.toolCallId} without its call`);
  }
  assert.equal(open.size, 0, `calls without results: ${[...open]}`);
}

test("bootstrap imports an existing OpenClaw transcript once", async () => {
  const engine = createLcmEngine(config());
  const sessionKey = unique("boot");
  const dir = mkdtempSync(join(tmpdir(), "oc-boot-"));
  const file = join(dir, "session.jsonl");
  const lines = [{ type: "session", version: 3, id: "sess-1", timestamp: "2026-11-01T10:00:00Z", cwd: "/" }];
  let parent: string | null = null;
  for (let i = 0; i < 6; i++) {
    const id = `e${i}`;
    const message = i % 2 === 0 ? userMsg(`old question ${i}`) : assistantMsg(`old answer ${i}`);
    lines.push({ type: "message", id, parentId: parent, timestamp: "2026-11-01T10:00:00Z", message } as any);
    parent = id;
  }
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
  const warnings: string[] = [];
  const args = { contextEngine: engine as any, hadSessionFile: true, sessionId: "sess-1", sessionKey, sessionFile: file, warn: (w: string) => warnings.push(w) };
  await bootstrapHarnessContextEngine(args);
  await bootstrapHarnessContextEngine(args); // a second start re-reads the same file
  assert.deepEqual(warnings, []);
  assert.equal((await statusOf(sessionKey)).messages, 6);
});

test("210 committed turns with retries, compaction, assembly under a small budget, forced compact, subagents", async () => {
  const engine = createLcmEngine(config({ compactWaitMs: 30_000 }));
  const sessionKey = unique("long");
  const ids = { sessionKey, sessionId: "sess-long" };
  const warnings: string[] = [];
  const warn = (w: string) => warnings.push(w);
  let transcript: any[] = [];
  let duplicates = 0;
  for (let i = 0; i < 210; i++) {
    const messages = turnMessages(i);
    const advancementKey = `${sessionKey}:turn:${i}`;
    const first = await engine.commitTurn({ ...ids, advancementKey, messages });
    assert.equal(first.status, "committed");
    if (i % 7 === 0) {
      // The host retries after a lost acknowledgement: nothing is stored twice.
      assert.equal((await engine.commitTurn({ ...ids, advancementKey, messages })).status, "duplicate");
      duplicates++;
    }
    const pre = transcript.length;
    transcript = [...transcript, ...messages];
    const done = await finalizeHarnessContextEngineTurn({
      contextEngine: engine as any, promptError: false, aborted: false, yieldAborted: false,
      sessionIdUsed: ids.sessionId, sessionKey, sessionFile: "", messagesSnapshot: transcript,
      prePromptMessageCount: pre, tokenBudget: BUDGET, warn,
    });
    assert.equal(done.postTurnFinalizationSucceeded, true);
  }
  assert.ok(duplicates >= 30);
  const stored = transcript.length;
  assert.equal((await statusOf(sessionKey)).messages, stored, "every message exactly once");
  // Threshold debt from afterTurn: the server's worker compacts in the background.
  const compacted = await waitFor("summaries", async () => {
    const s = await statusOf(sessionKey);
    return Object.keys(s.summaries).length > 0 && s.debt?.status !== "pending" && s.debt?.status !== "running" ? s : undefined;
  }, 60_000);
  assert.ok(compacted.context_tokens < compacted.threshold_tokens * 2);

  const assembled = await assembleHarnessContextEngine({
    contextEngine: engine as any, sessionId: ids.sessionId, sessionKey, agentId: "main", messages: transcript,
    tokenBudget: BUDGET, modelId: "fake-model", availableTools: new Set(["lcm_grep", "lcm_expand"]),
  });
  assert.ok(assembled);
  assert.ok(assembled.estimatedTokens <= BUDGET, `${assembled.estimatedTokens} > ${BUDGET}`);
  assert.ok(assembled.messages.length < transcript.length);
  assert.ok(JSON.stringify(assembled.messages).includes("<summary"), `summaries in the context: ${JSON.stringify(await statusOf(sessionKey))} ${assembled.estimatedTokens} ${assembled.messages.length}`);
  assert.match(assembled.systemPromptAddition ?? "", /lcm_grep/);
  assert.doesNotMatch(assembled.systemPromptAddition ?? "", /lcm_expand_query/);
  assertToolPairs(assembled.messages);
  assert.equal(assembled.messages[0].role, "user");

  const maintained = await runHarnessContextEngineMaintenance({ contextEngine: engine as any, sessionId: ids.sessionId, sessionKey, sessionFile: "", reason: "turn" });
  assert.equal(maintained?.changed ?? false, false);

  const before = await statusOf(sessionKey);
  const forced = await compactContextEngineWithSafetyTimeout(engine as any, { ...ids, force: true, tokenBudget: BUDGET, compactionTarget: "threshold" }, 60_000);
  assert.equal(forced.ok, true, JSON.stringify(forced));
  assert.equal(forced.result?.tokensBefore, before.context_tokens);
  assert.ok((forced.result?.tokensAfter ?? Infinity) <= before.context_tokens);
  const below = await compactContextEngineWithSafetyTimeout(engine as any, { sessionId: "x", sessionKey: unique("empty"), tokenBudget: BUDGET }, 10_000);
  assert.deepEqual([below.ok, below.compacted], [true, false]);

  // Subagents: a forked child sees the parent's summaries; an isolated one starts empty.
  const forkKey = `${sessionKey}:sub:fork`;
  const prepared = await engine.prepareSubagentSpawn({ parentSessionKey: sessionKey, childSessionKey: forkKey, contextMode: "fork" });
  assert.ok(prepared);
  const child = await engine.assemble({ sessionKey: forkKey, messages: [], tokenBudget: BUDGET });
  assert.ok(JSON.stringify(child.messages).includes("<summary"));
  const isoKey = `${sessionKey}:sub:iso`;
  await engine.prepareSubagentSpawn({ parentSessionKey: sessionKey, childSessionKey: isoKey, contextMode: "isolated" });
  assert.deepEqual((await engine.assemble({ sessionKey: isoKey, messages: [], tokenBudget: BUDGET })).messages, []);
  await prepared.rollback();
  assert.deepEqual((await engine.assemble({ sessionKey: forkKey, messages: [], tokenBudget: BUDGET })).messages, [], "rolled back");
  await engine.onSubagentEnded({ childSessionKey: isoKey, reason: "completed" });
  assert.equal((await statusOf(isoKey)).archived, true);
  await engine.onSubagentEnded({ childSessionKey: `${sessionKey}:never`, reason: "swept" }); // nothing to end: no error
  assert.deepEqual(warnings, []);
  await engine.dispose();
});

test("assemble sends the user's current message as the prompt", async () => {
  const { client, calls } = await recordingClient(config());
  const engine = createLcmEngine(config(), client);
  const sessionKey = unique("prompt");
  const ids = { sessionId: "sess-prompt", sessionKey };
  const history = [userMsg("where does the relay listen?"), assistantMsg("on ORBIT_RELAY_PORT, 7443")];
  await engine.ingestBatch({ ...ids, messages: history });
  const host = { contextEngine: engine as any, ...ids, agentId: "main", tokenBudget: 10_000, modelId: "fake-model" };
  // OpenClaw's embedded run: the history, and the message being sent apart as `prompt`.
  await assembleHarnessContextEngine({ ...host, messages: history, prompt: "Which port was ORBIT_RELAY_PORT again?" });
  // A reassembly inside a tool loop: no prompt; the loop's user message is the current one.
  const call = { id: "toolu_p1", name: "read_file", arguments: { path: "/etc/relay.conf" } };
  const loop = [...history, userMsg("Open the relay config, please"), assistantMsg("reading", call), toolResultMsg(call.id, "read_file", "port 7443")];
  await assembleHarnessContextEngine({ ...host, messages: loop });
  const prompts = calls.filter((c) => c.path.endsWith("/assemble")).map((c) => c.body.prompt);
  assert.deepEqual(prompts, ["Which port was ORBIT_RELAY_PORT again?", "Open the relay config, please"]);
  // No user message at all and no prompt: none is sent.
  await engine.assemble({ ...ids, messages: [assistantMsg("hello")], tokenBudget: 9_000 });
  assert.equal(calls.filter((c) => c.path.endsWith("/assemble")).at(-1)?.body.prompt, undefined);
  await engine.dispose();
});
