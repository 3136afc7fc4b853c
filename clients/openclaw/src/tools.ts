/** Agent tools over lcm-server's retrieval endpoints, scoped to the caller's session family. */
import { LcmClient } from "./client.ts";
import { type LcmConfig, lcmSessionKey } from "./config.ts";

// The server answers a little after a call's own deadline (its worker stores what it has).
const EXPAND_QUERY_GRACE_MS = 10_000;

type ToolContext = { sessionKey?: string; sessionId?: string };
type ToolResult = { content: { type: "text"; text: string }[]; details: unknown };

function result(details: unknown): ToolResult {
  return { content: [{ type: "text", text: JSON.stringify(details, null, 2) }], details };
}

export function createLcmTools(cfg: LcmConfig, ctx: ToolContext, client = new LcmClient(cfg)) {
  const family = () => lcmSessionKey(cfg, ctx);
  return [
    {
      name: "lcm_grep",
      label: "Search history",
      description:
        "Search this conversation's full history (original messages and summaries), including parts condensed out of the context. Returns matching snippets with message seq / summary ids. scope \"files\" searches inside stored large files; file_ids inside only those files.",
      parameters: {
        type: "object",
        properties: {
          pattern: { type: "string", description: "regex (RE2) or words, see mode" },
          mode: {
            type: "string",
            enum: ["regex", "full_text", "semantic", "hybrid"],
            description:
              "regex: exact strings; full_text: words, ranked; semantic / hybrid (where the server has semantic recall on): the same thing said in other words, hybrid also by its words",
          },
          scope: { type: "string", enum: ["messages", "summaries", "both", "files"] },
          file_ids: {
            type: "array",
            items: { type: "string", pattern: "^file_[0-9a-f]+$" },
            minItems: 1,
            maxItems: 100,
            description: "search inside only these stored files (file_... ids); implies scope files",
          },
          limit: { type: "integer", minimum: 1, maximum: 200 },
          sort: { type: "string", enum: ["recency", "relevance", "hybrid"] },
        },
        required: ["pattern"],
        additionalProperties: false,
      },
      async execute(_id: string, params: Record<string, unknown>, signal?: AbortSignal) {
        const out = await client.request("POST", "/v1/grep", { ...params, session_key: family() }, { signal });
        return result(out);
      },
    },
    {
      name: "lcm_describe",
      label: "Describe summary",
      description: "Show one summary (sum_...) or stored large file (file_...): content, time range, sources.",
      parameters: {
        type: "object",
        properties: { id: { type: "string", description: "sum_... or file_..." } },
        required: ["id"],
        additionalProperties: false,
      },
      async execute(_id: string, params: { id: string }, signal?: AbortSignal) {
        const kind = String(params.id).startsWith("file_") ? "files" : "summaries";
        return result(await client.request("GET", `/v1/${kind}/${encodeURIComponent(params.id)}`, undefined, { signal }));
      },
    },
    {
      name: "lcm_expand",
      label: "Expand summaries",
      description: "Read the original messages beneath summary ids, within a token cap.",
      parameters: {
        type: "object",
        properties: {
          summary_ids: { type: "array", items: { type: "string" }, minItems: 1 },
          token_cap: { type: "integer", minimum: 1 },
        },
        required: ["summary_ids"],
        additionalProperties: false,
      },
      async execute(_id: string, params: Record<string, unknown>, signal?: AbortSignal) {
        return result(await client.request("POST", "/v1/expand", params, { signal }));
      },
    },
    {
      name: "lcm_expand_query",
      label: "Ask history",
      description:
        "Answer a question from this conversation's expanded history (a focused sub-agent reads the originals); returns the answer with cited ids. " +
        "all_conversations asks across every conversation: the best-matching few are expanded under one deadline (timeout_ms) and one reading budget; " +
        "source_conversation_ids, conversations (per-conversation status) and truncated say what was covered. One call at a time per session (409 expansion_busy).",
      parameters: {
        type: "object",
        properties: {
          prompt: { type: "string", description: "the question" },
          query: { type: "string", description: "words to find the relevant history" },
          summary_ids: { type: "array", items: { type: "string" } },
          max_tokens: { type: "integer", minimum: 1 },
          all_conversations: { type: "boolean", description: "search every conversation, not only this session's" },
          timeout_ms: { type: "integer", minimum: 1, maximum: 3_600_000, description: "deadline of the whole call (the server caps it)" },
        },
        required: ["prompt"],
        additionalProperties: false,
      },
      async execute(_id: string, params: Record<string, unknown>, signal?: AbortSignal) {
        // session_key always names this session (with all_conversations it is the
        // asking session, for the server's one-call-at-a-time rule, not the scope).
        const body = { ...params, session_key: family() };
        const own = typeof params.timeout_ms === "number" ? params.timeout_ms + EXPAND_QUERY_GRACE_MS : undefined;
        return result(await client.request("POST", "/v1/expand-query", body, { signal, timeoutMs: own ?? cfg.expandQueryTimeoutMs }));
      },
    },
  ];
}
