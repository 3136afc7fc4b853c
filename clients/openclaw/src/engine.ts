/**
 * The OpenClaw context engine backed by lcm-server (owns compaction).
 *
 * Every lifecycle call is at most one HTTP request per page, bounded by
 * `timeoutMs`. A server that is down or hung makes the call throw an LcmError
 * and opens the shared circuit breaker (breaker.ts), so later calls fail at
 * once instead of each waiting a timeout. OpenClaw falls back per call: its
 * own pipeline messages for assemble, and a failed commit stays in its durable
 * outbox, replayed on a later turn (the server keys commits by advancement
 * key, so a replay is stored once). See client.ts.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { CircuitBreaker } from "./breaker.ts";
import { LcmClient, LcmError } from "./client.ts";
import { type LcmConfig, lcmSessionKey } from "./config.ts";
import {
  type AgentMessage,
  currentPrompt,
  estimateTokens,
  fromLcm,
  type MessageTimes,
  modelIdentity,
  type ReplayTarget,
  toLcmBatch,
  turnUsage,
} from "./messages.ts";
import { hostReader, syncHostTranscript, type TranscriptReader } from "./transcript.ts";

export const ENGINE_ID = "lcm";
export const ENGINE_VERSION = "0.2.0";

type Ids = { sessionKey?: string; sessionId?: string };

type AssembleOut = {
  messages: { role: string; content: unknown }[];
  message_times?: MessageTimes[] | null;
  estimated_tokens: number;
  summary_count: number;
  system_prompt_addition: string | null;
};
type StatusOut = { context_tokens: number; threshold_tokens: number; summaries: Record<string, number> };
type CompactOut = { status: string; context_tokens_before: number; context_tokens_after: number };
type TurnOut = { target_tokens: number | null; compaction: string; context_tokens_after: number | null };

/** OpenClaw's versioned runtime settings (accepted through `runtimeSettings`). */
type RuntimeSettings = {
  model?: { requested?: string | null; resolved?: string | null; provider?: string | null };
  limits?: { promptTokenBudget?: number | null; maxOutputTokens?: number | null };
  diagnostics?: { degradedReason?: string | null };
};
type RuntimeContext = Record<string, any> & { tokenBudget?: number; currentTokenCount?: number; trigger?: string };

function isMissing(error: unknown): boolean {
  return error instanceof LcmError && error.status === 404;
}

/**
 * The model a call serves, as lcm-server's `model_overrides` rules read it:
 * `model` (the resolved id, else the requested one) and `context_window` (the
 * prompt budget plus the output reserve, when OpenClaw knows both).
 */
export function modelSignals(settings?: RuntimeSettings | null, fallbackModel?: string): { model?: string; context_window?: number } {
  const model = settings?.model?.resolved ?? settings?.model?.requested ?? fallbackModel ?? undefined;
  const prompt = settings?.limits?.promptTokenBudget;
  const output = settings?.limits?.maxOutputTokens;
  const window = typeof prompt === "number" && prompt > 0 ? prompt + (typeof output === "number" && output > 0 ? output : 0) : undefined;
  return { ...(model ? { model: String(model).slice(0, 200) } : {}), ...(window ? { context_window: window } : {}) };
}

/**
 * The model an assemble serves, as assistant messages name it: the provider
 * OpenClaw runs it on and its model id without a `provider/` prefix (lcm-server
 * reads the `model` of modelSignals the same way once `provider` is sent).
 */
export function replayTarget(settings?: RuntimeSettings | null, fallbackModel?: string): ReplayTarget {
  const provider = settings?.model?.provider ?? undefined;
  let model = settings?.model?.resolved ?? settings?.model?.requested ?? fallbackModel ?? undefined;
  if (model && provider && model.startsWith(provider + "/")) model = model.slice(provider.length + 1);
  return modelIdentity({ provider, model });
}

/** Is this compact() OpenClaw's recovery from a provider's context-overflow error? */
export function isOverflowRecovery(params: { runtimeContext?: RuntimeContext; runtimeSettings?: RuntimeSettings }): boolean {
  return params.runtimeContext?.trigger === "overflow" || params.runtimeSettings?.diagnostics?.degradedReason === "context_overflow";
}

/** With OpenClaw's tool search on, plugin tools are reached through `tool_call`. */
export const TOOL_CALLER = "tool_call";
const RECALL_TOOLS = ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"];

/**
 * `available_tools` and `tool_caller` for the server's recall prompt.
 *
 * OpenClaw asks for a turn's context twice: first with the run's whole tool
 * catalog, then with the tools the model sees. Under tool search (its
 * default) `tool_call` is in both and the recall tools are deferred behind
 * it (absent from the second set, present in the first). Only what the
 * recall prompt depends on is sent, so both requests are the same and the
 * second is answered from the first.
 */
export function recallTools(available?: Set<string>): { available_tools: string[] | null; tool_caller?: string } {
  if (!available) return { available_tools: null };
  if (available.has(TOOL_CALLER)) return { available_tools: null, tool_caller: TOOL_CALLER };
  return { available_tools: RECALL_TOOLS.filter((t) => available.has(t)) };
}

/**
 * Assemble answers kept briefly per session: OpenClaw asks twice per turn
 * (the same request once recallTools has reduced it). Every write to the
 * session drops the entry when it starts and again when it ends: an assemble
 * asked while the write was in flight may not see it, and must not be reused
 * after it. Failures are not kept.
 */
export class RecentAssembles {
  private readonly entries = new Map<string, { body: string; at: number; answer: Promise<AssembleOut> }>();
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(ttlMs = 30_000, now: () => number = Date.now) {
    this.ttlMs = ttlMs;
    this.now = now;
  }

  get(session: string, body: string, load: () => Promise<AssembleOut>): Promise<AssembleOut> {
    const hit = this.entries.get(session);
    if (hit && hit.body === body && this.now() - hit.at < this.ttlMs) return hit.answer;
    const answer = load();
    const entry = { body, at: this.now(), answer };
    this.entries.set(session, entry);
    answer.catch(() => {
      if (this.entries.get(session) === entry) this.entries.delete(session);
    });
    return answer;
  }

  forget(session: string): void {
    this.entries.delete(session);
  }
}

/** What the engines and tools of one plugin registration share. */
export class PluginShared {
  readonly breaker: CircuitBreaker;
  readonly cursors = new Map<string, string>();
  readonly assembles = new RecentAssembles();
  /** size:mtime of transcript files already imported (file-backed sessions). */
  readonly importedFiles = new Map<string, string>();
  reader: Promise<TranscriptReader | null> | null = null;

  constructor(cfg: Pick<LcmConfig, "breakerCooldownMs">) {
    this.breaker = new CircuitBreaker(cfg.breakerCooldownMs);
  }

  hostReader(): Promise<TranscriptReader | null> {
    this.reader ??= hostReader();
    return this.reader;
  }
}

export function createLcmEngine(cfg: LcmConfig, client?: LcmClient, shared = new PluginShared(cfg)) {
  const http = client ?? new LcmClient(cfg, shared.breaker);
  const key = (ids: Ids) => lcmSessionKey(cfg, ids);
  const path = (ids: Ids, action: string) => http.conversationPath(key(ids), action);
  const budgetOf = (tokenBudget?: number | null) => tokenBudget ?? cfg.defaultTokenBudget;
  /** A write to the session, with its kept assemble answer dropped before and after (RecentAssembles). */
  async function writing<T>(ids: Ids, write: () => Promise<T>): Promise<T> {
    shared.assembles.forget(key(ids));
    try {
      return await write();
    } finally {
      shared.assembles.forget(key(ids));
    }
  }

  async function turn(ids: Ids, messages: AgentMessage[], tokenBudget?: number, settings?: RuntimeSettings) {
    const batch = toLcmBatch(messages);
    if (batch.length === 0) return { ingested: 0 };
    const usage = turnUsage(messages);
    return await writing(ids, () =>
      http.request<{ ingested: number }>("POST", path(ids, "turns"), {
        session_id: ids.sessionId,
        messages: batch,
        token_budget: budgetOf(tokenBudget ?? settings?.limits?.promptTokenBudget),
        ...modelSignals(settings),
        ...(usage ? { usage } : {}),
      }),
    );
  }

  /** A file-backed session's transcript, through the server's anchored import (once per file state). */
  async function importFile(params: Ids, file: string) {
    const stat = statSync(file);
    const mark = `${stat.size}:${stat.mtimeMs}`;
    const memo = `${key(params)}\n${params.sessionId ?? ""}\n${file}`;
    if (shared.importedFiles.get(memo) === mark) return { bootstrapped: true, importedMessages: 0, reason: "transcript unchanged" };
    const out = await writing(params, () =>
      http.request<{ imported: number; anchor: string }>("POST", path(params, "bootstrap"), {
        session_id: params.sessionId,
        transcript_jsonl: readFileSync(file, "utf8"),
        format: "openclaw",
      }),
    );
    shared.importedFiles.set(memo, mark);
    return { bootstrapped: true, importedMessages: out.imported, reason: `anchor: ${out.anchor}` };
  }

  return {
    info: {
      id: ENGINE_ID,
      name: "Lossless Context Management (lcm-server)",
      version: ENGINE_VERSION,
      ownsCompaction: true,
      acceptedHostParams: ["sessionKey", "prompt", "runtimeContext", "runtimeSettings", "abortSignal", "sessionTarget"],
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
      turnMaintenanceMode: "foreground",
    },

    /**
     * Bring the server up to date with the host transcript: only the entries
     * after the stored cursor (transcript.ts); a file-backed session through
     * the anchored import, skipped while the file is unchanged.
     */
    async bootstrap(params: Ids & { sessionFile?: string; sessionTarget?: Record<string, any> }) {
      const file = params.sessionFile;
      if (file && existsSync(file) && statSync(file).isFile()) return await importFile(params, file);
      const read = await shared.hostReader();
      if (read === null) return { bootstrapped: false, reason: "this OpenClaw has no transcript cursor API" };
      const memoKey = `${key(params)}\n${params.sessionId ?? ""}`;
      const sync = { client: http, read, path: (action: string) => path(params, action), cursors: shared.cursors, memoKey };
      return await writing(params, () => syncHostTranscript(sync, params));
    },

    async ingest(params: Ids & { message: AgentMessage; isHeartbeat?: boolean }) {
      if (params.isHeartbeat) return { ingested: false };
      const batch = toLcmBatch([params.message]);
      if (batch.length === 0) return { ingested: false };
      const body = { session_id: params.sessionId, messages: batch };
      const out = await writing(params, () => http.request<{ ingested: number }>("POST", path(params, "messages"), body));
      return { ingested: out.ingested > 0 };
    },

    async ingestBatch(params: Ids & { messages: AgentMessage[]; isHeartbeat?: boolean }) {
      if (params.isHeartbeat) return { ingestedCount: 0 };
      const batch = toLcmBatch(params.messages);
      if (batch.length === 0) return { ingestedCount: 0 };
      const body = { session_id: params.sessionId, messages: batch };
      const out = await writing(params, () => http.request<{ ingested: number }>("POST", path(params, "messages"), body));
      return { ingestedCount: out.ingested };
    },

    /** One accepted turn, exactly once per advancement key (the server stores the key). */
    async commitTurn(params: Ids & { advancementKey: string; messages: AgentMessage[]; runtimeContext?: RuntimeContext; runtimeSettings?: RuntimeSettings }) {
      const live = params.runtimeContext?.currentTokenCount;
      const usage = turnUsage(params.messages);
      const body = {
        advancement_key: params.advancementKey,
        session_id: params.sessionId,
        messages: toLcmBatch(params.messages),
        token_budget: budgetOf(params.runtimeContext?.tokenBudget ?? params.runtimeSettings?.limits?.promptTokenBudget),
        ...modelSignals(params.runtimeSettings),
        ...(typeof live === "number" && live >= 0 ? { current_token_count: Math.floor(live) } : {}),
        ...(usage ? { usage } : {}),
      };
      const out = await writing(params, () => http.request<{ status: "committed" | "duplicate" }>("POST", path(params, "commits"), body));
      return { status: out.status };
    },

    async afterTurn(params: Ids & { messages: AgentMessage[]; prePromptMessageCount: number; tokenBudget?: number; isHeartbeat?: boolean; runtimeSettings?: RuntimeSettings }) {
      if (params.isHeartbeat) return;
      // Messages already stored (commitTurn, ingest) carry the same client ids: not stored twice.
      await turn(params, params.messages.slice(params.prePromptMessageCount), params.tokenBudget, params.runtimeSettings);
    },

    async assemble(params: Ids & { messages: AgentMessage[]; tokenBudget?: number; availableTools?: Set<string>; prompt?: string; model?: string; runtimeSettings?: RuntimeSettings }) {
      // Signed thinking is replayed only to the model that wrote it (lcm-server keeps the rest out).
      const target = replayTarget(params.runtimeSettings, params.model);
      const request = {
        token_budget: budgetOf(params.tokenBudget ?? params.runtimeSettings?.limits?.promptTokenBudget),
        session_id: params.sessionId,
        prompt: currentPrompt(params.prompt, params.messages),
        system_prompt: true,
        include_times: true,
        ...recallTools(params.availableTools),
        ...modelSignals(params.runtimeSettings, params.model),
        ...(target.model && target.provider ? { provider: target.provider } : {}),
      };
      let out: AssembleOut;
      try {
        out = await shared.assembles.get(key(params), JSON.stringify(request), () =>
          http.request<AssembleOut>("POST", path(params, "assemble"), request),
        );
      } catch (error) {
        // A session lcm-server has not seen yet: the host's own messages are the context.
        if (isMissing(error)) return { messages: params.messages, estimatedTokens: estimateTokens(params.messages) };
        throw error;
      }
      return {
        messages: fromLcm(out.messages, out.message_times, Date.now(), target),
        estimatedTokens: out.estimated_tokens,
        ...(out.system_prompt_addition ? { systemPromptAddition: out.system_prompt_addition } : {}),
      };
    },

    async compact(params: Ids & { tokenBudget?: number; force?: boolean; currentTokenCount?: number; compactionTarget?: "budget" | "threshold"; abortSignal?: AbortSignal; runtimeContext?: RuntimeContext; runtimeSettings?: RuntimeSettings }) {
      const budget = budgetOf(params.tokenBudget);
      return await writing(params, () => compactFor(params, budget));
    },

    /** lcm-server keeps its own copy; the host transcript is never rewritten. */
    async maintain() {
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "lcm-server keeps history outside the transcript" };
    },

    async prepareSubagentSpawn(params: { parentSessionKey: string; childSessionKey: string; contextMode?: "isolated" | "fork"; childSessionId?: string; ttlMs?: number }) {
      const child = lcmSessionKey(cfg, { sessionKey: params.childSessionKey, sessionId: params.childSessionId });
      shared.assembles.forget(child);
      try {
        await http.request("POST", http.conversationPath(child, "fork"), {
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
          shared.assembles.forget(child);
          await http.request("POST", http.conversationPath(child, "fork/rollback"));
        },
      };
    },

    async onSubagentEnded(params: { childSessionKey: string; reason: string }) {
      const child = lcmSessionKey(cfg, { sessionKey: params.childSessionKey });
      shared.assembles.forget(child);
      try {
        await http.request("POST", http.conversationPath(child, "fork/end"), { reason: params.reason });
      } catch (error) {
        if (!isMissing(error)) throw error; // a child never prepared has nothing to end
      }
    },

    async dispose() {
      http.abortAll();
    },
  };

  /** compact(): overflow recovery, or compaction when forced or at the threshold. */
  async function compactFor(params: Ids & { force?: boolean; currentTokenCount?: number; compactionTarget?: "budget" | "threshold"; abortSignal?: AbortSignal; runtimeContext?: RuntimeContext; runtimeSettings?: RuntimeSettings }, budget: number) {
    if (isOverflowRecovery(params)) return await recoverFromOverflow(params, budget);
    let status: StatusOut;
    try {
      status = await http.request<StatusOut>("GET", `${path(params, "status")}?token_budget=${budget}`, undefined, { signal: params.abortSignal });
    } catch (error) {
      if (isMissing(error)) return { ok: true, compacted: false, reason: "no conversation stored yet" };
      throw error;
    }
    if (!params.force && status.context_tokens < status.threshold_tokens) {
      return { ok: true, compacted: false, reason: "below the compaction threshold", result: { tokensBefore: status.context_tokens, tokensAfter: status.context_tokens } };
    }
    const target = params.compactionTarget === "threshold" ? status.threshold_tokens : undefined;
    return await compactNow(params, budget, target);
  }

  /** Compact now on the server, waiting up to `compactWaitMs` for the sweep. */
  async function compactNow(params: Ids & { abortSignal?: AbortSignal }, budget: number, target?: number | null) {
    const out = await http.request<CompactOut>(
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
  }

  /**
   * The provider refused the prompt as too long: report the overflow on a
   * turn (the server records overflow debt with a target under the budget,
   * less the host's own overhead read from the live token count), then
   * compact to that target before OpenClaw retries.
   */
  async function recoverFromOverflow(params: Ids & { currentTokenCount?: number; abortSignal?: AbortSignal; runtimeContext?: RuntimeContext; runtimeSettings?: RuntimeSettings }, budget: number) {
    const live = params.currentTokenCount ?? params.runtimeContext?.currentTokenCount;
    let reported: TurnOut;
    try {
      reported = await http.request<TurnOut>("POST", path(params, "turns"), {
        session_id: params.sessionId,
        messages: [],
        token_budget: budget,
        overflow: true,
        ...modelSignals(params.runtimeSettings),
        ...(typeof live === "number" && live >= 0 ? { current_token_count: Math.floor(live) } : {}),
      }, { signal: params.abortSignal });
    } catch (error) {
      if (isMissing(error)) return { ok: true, compacted: false, reason: "no conversation stored yet" };
      throw error;
    }
    return await compactNow(params, budget, reported.target_tokens);
  }
}
