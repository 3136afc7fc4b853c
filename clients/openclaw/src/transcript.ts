/**
 * Bringing lcm-server up to date with the host's transcript at a constant
 * cost per turn.
 *
 * OpenClaw calls `bootstrap()` before every run. With SQLite sessions (its
 * default) the transcript is read through
 * `readSessionTranscriptVisibleMessageDelta`, a cursor API: pages oldest to
 * newest and an opaque cursor that resumes after the last message returned.
 * The server keeps, per conversation, the cursor of the last host entry it
 * stored (`host_cursor`, written in the same transaction as the messages), so
 * a bootstrap sends only the entries after it; the plugin also remembers it in
 * memory, so a bootstrap with nothing new makes no request at all. A rewritten
 * or branched transcript answers `reset` with a fresh cursor: the plugin then
 * reads it all again and the server's client-id deduplication keeps what it
 * already has (the reconciliation every bootstrap used to do).
 *
 * No lock: two gateway processes syncing one session may store their cursors
 * in either order, so the stored one can move back. That costs only a
 * re-send of entries the server already holds (deduplicated by client id);
 * a cursor ahead of what is stored cannot happen, since each is written in
 * the transaction of the batch that brought the entries up to it.
 */
import type { LcmClient } from "./client.ts";
import { LcmError } from "./client.ts";
import { type AgentMessage, toLcmBatch } from "./messages.ts";

/** Host entries per page and per POST: bounded requests whatever the session's length. */
export const PAGE_MESSAGES = 500;

export type HostIds = { sessionKey?: string; sessionId?: string; sessionTarget?: Record<string, any> };
export type SyncResult = { bootstrapped: boolean; importedMessages?: number; reason?: string };

type Page =
  | { kind: "page"; cursor: string; entries?: { message?: AgentMessage }[]; hasMore?: boolean }
  | { kind: "reset"; cursor: string; reason?: string }
  | { kind: "missing" }
  | { kind: "unavailable"; reason?: string };

export type TranscriptReader = (params: Record<string, unknown>) => Promise<Page>;

/** OpenClaw's reader, or null when this OpenClaw does not export it. */
export async function hostReader(): Promise<TranscriptReader | null> {
  // A specifier in a variable: the package builds without OpenClaw installed
  // (its peer dependency, present where the gateway loads the plugin).
  const specifier = "openclaw/plugin-sdk/session-transcript-runtime";
  try {
    const runtime: any = await import(specifier);
    return typeof runtime.readSessionTranscriptVisibleMessageDelta === "function"
      ? runtime.readSessionTranscriptVisibleMessageDelta
      : null;
  } catch {
    return null;
  }
}

/** The cursor the server holds for a conversation; undefined when it has none. */
async function storedCursor(client: LcmClient, conversationPath: string, sessionId?: string): Promise<string | undefined> {
  const query = sessionId ? `?session_id=${encodeURIComponent(sessionId)}` : "";
  try {
    const out = await client.request<{ host_cursor: string | null }>("GET", `${conversationPath}${query}`);
    return out.host_cursor ?? undefined;
  } catch (error) {
    if (error instanceof LcmError && error.status === 404) return undefined; // a conversation not stored yet
    throw error;
  }
}

export interface SyncDeps {
  client: LcmClient;
  read: TranscriptReader;
  /** `/v1/conversations/{key}/{action}` for this session. */
  path: (action: string) => string;
  /** In-memory cursors by session (shared by the engines of one registration). */
  cursors: Map<string, string>;
  memoKey: string;
}

/** Send the host entries after the stored cursor (all of them after a reset). */
export async function syncHostTranscript(deps: SyncDeps, ids: HostIds): Promise<SyncResult> {
  const target = ids.sessionTarget;
  const scope = {
    agentId: target?.agentId,
    sessionKey: target?.sessionKey ?? ids.sessionKey,
    sessionId: target?.sessionId ?? ids.sessionId,
    ...(target?.storePath ? { storePath: target.storePath } : {}),
  };
  if (!scope.sessionKey) return { bootstrapped: false, reason: "no session key to read the host transcript by" };
  let cursor = deps.cursors.get(deps.memoKey) ?? (await storedCursor(deps.client, deps.path("host-cursor"), ids.sessionId));
  let imported = 0;
  let resets = 0;
  for (;;) {
    let page: Page;
    try {
      page = await deps.read({ ...scope, maxMessages: PAGE_MESSAGES, ...(cursor !== undefined ? { cursor } : {}) });
    } catch (error) {
      // The stored cursor is at or past the current turn's admission fence (a
      // retried turn): nothing before the fence is missing from the server.
      if ((error as Error)?.name === "SessionTranscriptReadFenceError") break;
      throw error;
    }
    if (page.kind === "missing") return { bootstrapped: false, reason: "the host has no transcript for this session" };
    if (page.kind === "unavailable") return { bootstrapped: false, reason: `host transcript unavailable (${page.reason ?? "unknown"})` };
    if (page.kind === "reset") {
      // Rewritten, branched or another session's cursor: read it all again
      // (at most once a bootstrap; the server deduplicates by client id).
      if (++resets > 1) return { bootstrapped: false, reason: "host transcript reset twice while reading" };
      cursor = page.cursor;
      continue;
    }
    const batch = toLcmBatch((page.entries ?? []).map((e) => e.message).filter((m): m is AgentMessage => Boolean(m)));
    if (batch.length > 0 || page.cursor !== cursor) {
      const out = await deps.client.request<{ ingested: number }>("POST", deps.path("messages"), {
        session_id: ids.sessionId,
        messages: batch,
        host_cursor: page.cursor,
      });
      imported += out.ingested;
    }
    cursor = page.cursor;
    if (!page.hasMore || !page.entries?.length) break;
  }
  if (cursor !== undefined) deps.cursors.set(deps.memoKey, cursor);
  return { bootstrapped: true, importedMessages: imported, ...(resets ? { reason: "host transcript was reset: re-read" } : {}) };
}
