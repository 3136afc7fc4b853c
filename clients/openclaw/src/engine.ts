/**
 * The OpenClaw context engine backed by lcm-server (owns compaction).
 *
 * Every lifecycle call is one HTTP request bounded by `timeoutMs`; a server that
 * is down or slow makes the call throw an LcmError, which OpenClaw treats as an
 * engine failure (quarantine, fallback to its legacy engine). See client.ts.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { LcmClient, LcmError } from "./client.ts";
import { type LcmConfig, lcmSessionKey } from "./config.ts";
import { type AgentMessage, estimateTokens, fromLcm, toLcmBatch } from "./messages.ts";

export const ENGINE_ID = "lcm";
export const ENGINE_VERSION = "0.1.0";

type Ids = { sessionKey?: string; sessionId?: string };

type AssembleOut = {
  messages: { role: string; content: unknown }[];
  estimated_tokens: number;
  summary_count: number;
  system_prompt_addition: string | null;
};
type StatusOut = { context_tokens: number; threshold_tokens: number; summaries: Record<string, number> };
type CompactOut = { status: string; context_tokens_before: number; context_tokens_after: number };

function isMissing(error: unknown): boolean {
  return error instanceof LcmError && error.status === 404;
}

export function createLcmEngine(cfg: LcmConfig, client = new LcmClient(cfg)) {
  const key = (ids: Ids) => lcmSessionKey(cfg, ids);
  const path = (ids: Ids, action: string) => client.conversationPath(key(ids), action);
  const budgetOf = (tokenBudget?: number) => tokenBudget ?? cfg.defaultTokenBudget;

  async function turn(ids: Ids, messages: AgentMessage[], tokenBudget?: number) {
    const batch = toLcmBatch(messages);
    if (batch.length === 0) return { ingested: 0 };
    return await client.request<{ ingested: number }>("POST", path(ids, "turns"), {
      session_id: ids.sessionId,
      messages: batch,
      token_budget: budgetOf(tokenBudget),
    });
  }

  return {
    info: {
      id: ENGINE_ID,
      name: "Lossless Context Management (lcm-server)",
      version: ENGINE_VERSION,
      ownsCompaction: true,
      acceptedHostParams: ["sessionKey", "prompt", "runtimeContext", "abortSignal", "sessionTarget"],
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
      turnMaintenanceMode: "foreground",
    },

    /** Import the session's existing transcript (reconciled by the server: never duplicated). */
    async bootstrap(params: Ids & { sessionFile?: string; sessionTarget?: Record<string, any> }) {
      const file = params.sessionFile;
      if (file && existsSync(file) && statSync(file).isFile()) {
        const out = await client.request<{ imported: number; anchor: string }>("POST", path(params, "bootstrap"), {
          session_id: params.sessionId,
          transcript_jsonl: readFileSync(file, "utf8"),
          format: "openclaw",
        });
        return { bootstrapped: true, importedMessages: out.imported, reason: `anchor: ${out.anchor}` };
      }
      const messages = await readHostTranscript(params);
      if (messages === null) return { bootstrapped: false, reason: "no transcript file or readable session target" };
      const batch = toLcmBatch(messages);
      let imported = 0;
      for (let i = 0; i < batch.length; i += 500) {
        const out = await client.request<{ ingested: number }>("POST", path(params, "messages"), {
          session_id: params.sessionId,
          messages: batch.slice(i, i + 500),
        });
        imported += out.ingested;
      }
      return { bootstrapped: true, importedMessages: imported };
    },

    async ingest(params: Ids & { message: AgentMessage; isHeartbeat?: boolean }) {
      if (params.isHeartbeat) return { ingested: false };
      const batch = toLcmBatch([params.message]);
      if (batch.length === 0) return { ingested: false };
      const out = await client.request<{ ingested: number }>("POST", path(params, "messages"), {
        session_id: params.sessionId,
        messages: batch,
      });
      return { ingested: out.ingested > 0 };
    },

    async ingestBatch(params: Ids & { messages: AgentMessage[]; isHeartbeat?: boolean }) {
      if (params.isHeartbeat) return { ingestedCount: 0 };
      const batch = toLcmBatch(params.messages);
      if (batch.length === 0) return { ingestedCount: 0 };
      const out = await client.request<{ ingested: number }>("POST", path(params, "messages"), {
        session_id: params.sessionId,
        messages: batch,
      });
      return { ingestedCount: out.ingested };
    },

    /** One accepted turn, exactly once per advancement key (the server stores the key). */
    async commitTurn(params: Ids & { advancementKey: string; messages: AgentMessage[]; runtimeContext?: Record<string, any> }) {
      const out = await client.request<{ status: "committed" | "duplicate" }>("POST", path(params, "commits"), {
        advancement_key: params.advancementKey,
        session_id: params.sessionId,
        messages: toLcmBatch(params.messages),
        token_budget: budgetOf(params.runtimeContext?.tokenBudget),
      });
      return { status: out.status };
    },

    async afterTurn(params: Ids & { messages: AgentMessage[]; prePromptMessageCount: number; tokenBudget?: number; isHeartbeat?: boolean }) {
      if (params.isHeartbeat) return;
      // Messages already stored (commitTurn, ingest) carry the same client ids: not stored twice.
      await turn(params, params.messages.slice(params.prePromptMessageCount), params.tokenBudget);
    },

    async assemble(params: Ids & { messages: AgentMessage[]; tokenBudget?: number; availableTools?: Set<string>; prompt?: string }) {
      let out: AssembleOut;
      try {
        out = await client.request<AssembleOut>("POST", path(params, "assemble"), {
          token_budget: budgetOf(params.tokenBudget),
          session_id: params.sessionId,
          prompt: params.prompt,
          system_prompt: true,
          available_tools: params.availableTools ? [...params.availableTools] : null,
        });
      } catch (error) {
        // A session lcm-server has not seen yet: the host's own messages are the context.
        if (isMissing(error)) return { messages: params.messages, estimatedTokens: estimateTokens(params.messages) };
        throw error;
      }
      return {
        messages: fromLcm(out.messages),
        estimatedTokens: out.estimated_tokens,
        ...(out.system_prompt_addition ? { systemPromptAddition: out.system_prompt_addition } : {}),
      };
    },

    async compact(params: Ids & { tokenBudget?: number; force?: boolean; compactionTarget?: "budget" | "threshold"; abortSignal?: AbortSignal }) {
      const budget = budgetOf(params.tokenBudget);
      let status: StatusOut;
      try {
        status = await client.request<StatusOut>("GET", `${path(params, "status")}?token_budget=${budget}`, undefined, { signal: params.abortSignal });
      } catch (error) {
        if (isMissing(error)) return { ok: true, compacted: false, reason: "no conversation stored yet" };
        throw error;
      }
      if (!params.force && status.context_tokens < status.threshold_tokens) {
        return { ok: true, compacted: false, reason: "below the compaction threshold", result: { tokensBefore: status.context_tokens, tokensAfter: status.context_tokens } };
      }
      const target = params.compactionTarget === "threshold" ? status.threshold_tokens : undefined;
      const out = await client.request<CompactOut>(
        "POST",
        path(params, "compact"),
        { token_budget: budget, ...(target ? { target_tokens: target } : {}), wait: cfg.compactWaitMs / 1000 },
        { timeoutMs: cfg.compactWaitMs + cfg.timeoutMs, signal: params.abortSignal },
      );
      const compacted = out.context_tokens_after < out.context_tokens_before;
      return {
        ok: out.status !== "failed",
        compacted,
        reason: `lcm-server compaction ${out.status}`,
        result: { tokensBefore: out.context_tokens_before, tokensAfter: out.context_tokens_after, details: { status: out.status } },
      };
    },

    /** lcm-server keeps its own copy; the host transcript is never rewritten. */
    async maintain() {
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "lcm-server keeps history outside the transcript" };
    },

    async prepareSubagentSpawn(params: { parentSessionKey: string; childSessionKey: string; contextMode?: "isolated" | "fork"; childSessionId?: string; ttlMs?: number }) {
      const child = lcmSessionKey(cfg, { sessionKey: params.childSessionKey, sessionId: params.childSessionId });
      try {
        await client.request("POST", client.conversationPath(child, "fork"), {
          parent_session_key: lcmSessionKey(cfg, { sessionKey: params.parentSessionKey }),
          session_id: params.childSessionId,
          mode: params.contextMode ?? "isolated",
          ttl_seconds: params.ttlMs ? params.ttlMs / 1000 : undefined,
        });
      } catch (error) {
        if (isMissing(error)) return undefined; // the parent has no stored context: nothing to prepare
        throw error;
      }
      return {
        rollback: async () => {
          await client.request("POST", client.conversationPath(child, "fork/rollback"));
        },
      };
    },

    async onSubagentEnded(params: { childSessionKey: string; reason: string }) {
      const child = lcmSessionKey(cfg, { sessionKey: params.childSessionKey });
      try {
        await client.request("POST", client.conversationPath(child, "fork/end"), { reason: params.reason });
      } catch (error) {
        if (!isMissing(error)) throw error; // a child never prepared has nothing to end
      }
    },

    async dispose() {
      client.abortAll();
    },
  };
}

/** The session's visible messages through OpenClaw's transcript runtime (SQLite-backed sessions). */
async function readHostTranscript(params: { sessionTarget?: Record<string, any>; sessionKey?: string; sessionId?: string }): Promise<AgentMessage[] | null> {
  const target = params.sessionTarget;
  if (!target?.sessionKey && !params.sessionKey) return null;
  let runtime: any;
  try {
    runtime = await import("openclaw/plugin-sdk/session-transcript-runtime");
  } catch {
    return null;
  }
  const messages: AgentMessage[] = [];
  let cursor: unknown;
  for (;;) {
    const page = await runtime.readSessionTranscriptVisibleMessageDelta({
      agentId: target?.agentId,
      sessionKey: target?.sessionKey ?? params.sessionKey,
      sessionId: target?.sessionId ?? params.sessionId,
      ...(target?.storePath ? { storePath: target.storePath } : {}),
      ...(cursor !== undefined ? { cursor } : {}),
    });
    if (page?.kind !== "page") return messages.length > 0 ? messages : null;
    for (const entry of page.entries ?? []) if (entry?.message) messages.push(entry.message);
    if (!page.entries?.length || page.cursor === cursor) return messages;
    cursor = page.cursor;
    if (page.hasMore === false) return messages;
  }
}
