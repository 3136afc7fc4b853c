/**
 * OpenClaw (pi) agent messages <-> lcm-server messages (Anthropic Messages shape).
 *
 * To lcm: `user` -> user (text, base64 images); `assistant` -> assistant
 * (`toolCall` -> `tool_use`, `thinking` -> `thinking`, with the `provider` and
 * `model` that wrote it); `toolResult` -> a `tool`
 * message with one `tool_result` block. Each message carries a client id that
 * is a hash of its role, content and timestamp, so ingest, afterTurn and
 * commitTurn of the same message store it once.
 *
 * From lcm: assembled user/assistant messages back to pi messages; `tool_result`
 * blocks become `toolResult` messages after the assistant that called them.
 *
 * Entries marked `excludeFromContext` are never stored (see isExcluded).
 */
import { createHash } from "node:crypto";

export type AgentMessage = Record<string, any>;
export type LcmMessage = {
  role: string;
  content: string | Record<string, any>[];
  id?: string;
  created_at?: number;
  provider?: string;
  model?: string;
};

/** The model an assembled context is for: lcm-server replays signed thinking only to it. */
export type ReplayTarget = { provider?: string; model?: string };

/**
 * The provider and model an assistant message names, as lcm-server stores them
 * (at most 100 and 200 characters; a longer value is left out, not cut).
 */
export function modelIdentity(message: AgentMessage): ReplayTarget {
  const out: ReplayTarget = {};
  if (typeof message.provider === "string" && message.provider.length >= 1 && message.provider.length <= 100) out.provider = message.provider;
  if (typeof message.model === "string" && message.model.length >= 1 && message.model.length <= 200) out.model = message.model;
  return out;
}

function blocks(content: unknown): Record<string, any>[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? content.filter((b) => b && typeof b === "object") : [];
}

function textOf(content: unknown): string {
  return blocks(content)
    .map((b) => (b.type === "text" ? String(b.text ?? "") : JSON.stringify(b)))
    .join("\n");
}

export function clientId(message: AgentMessage): string {
  const identity = JSON.stringify([message.role, message.content, message.timestamp ?? null, message.toolCallId ?? null]);
  return "oc:" + createHash("sha256").update(identity).digest("hex").slice(0, 32);
}

function userBlock(block: Record<string, any>): Record<string, any> {
  if (block.type === "text") return { type: "text", text: String(block.text ?? "") };
  if (block.type === "image") {
    return { type: "image", source: { type: "base64", media_type: block.mimeType ?? "image/png", data: String(block.data ?? "") } };
  }
  return { type: "text", text: JSON.stringify(block) };
}

function assistantBlock(block: Record<string, any>): Record<string, any> {
  if (block.type === "toolCall") {
    const input = block.arguments && typeof block.arguments === "object" ? block.arguments : { arguments: block.arguments };
    return { type: "tool_use", id: String(block.id), name: String(block.name), input };
  }
  if (block.type === "thinking") {
    if (block.redacted) return { type: "redacted_thinking", data: String(block.thinkingSignature ?? "") };
    const out: Record<string, any> = { type: "thinking", thinking: String(block.thinking ?? "") };
    if (typeof block.thinkingSignature === "string") out.signature = block.thinkingSignature;
    return out;
  }
  if (block.type === "text") return { type: "text", text: String(block.text ?? "") };
  return { type: "text", text: JSON.stringify(block) };
}

/**
 * Entries OpenClaw keeps in the transcript but out of the model's context
 * (`excludeFromContext`, e.g. tool search's nested-call records). Stored, they
 * would become user text between a tool_use and its tool_result.
 */
export function isExcluded(message: AgentMessage): boolean {
  return message?.excludeFromContext === true;
}

/** One pi message as lcm-server stores it; null for messages that carry no conversation content. */
export function toLcm(message: AgentMessage): LcmMessage | null {
  if (isExcluded(message)) return null;
  const created_at = typeof message.timestamp === "number" ? message.timestamp : undefined;
  const id = clientId(message);
  switch (message.role) {
    case "user":
      return {
        role: "user",
        content: typeof message.content === "string" ? message.content : blocks(message.content).map(userBlock),
        id,
        created_at,
      };
    case "assistant": {
      const content = blocks(message.content).map(assistantBlock);
      if (content.length === 0) content.push({ type: "text", text: "" });
      return { role: "assistant", content, id, created_at, ...modelIdentity(message) };
    }
    case "toolResult":
      return {
        role: "tool",
        content: [
          {
            type: "tool_result",
            tool_use_id: String(message.toolCallId),
            content: textOf(message.content),
            ...(message.isError ? { is_error: true } : {}),
          },
        ],
        id,
        created_at,
      };
    default:
      // custom / hook messages take part in the model context as user text
      if (message.content === undefined) return null;
      return { role: "user", content: textOf(message.content), id, created_at };
  }
}

export function toLcmBatch(messages: AgentMessage[]): LcmMessage[] {
  return messages.map(toLcm).filter((m): m is LcmMessage => m !== null);
}

/** A turn's model usage as lcm-server's `…/turns` takes it (`usage`). */
export type TurnUsage = { input_tokens: number; output_tokens: number; cache_read_tokens: number; cache_write_tokens: number };

const MAX_TOKENS = 1_000_000_000; // the server refuses a larger count
const tokenCount = (n: unknown) => (typeof n === "number" && Number.isFinite(n) && n > 0 ? Math.min(Math.floor(n), MAX_TOKENS) : 0);

/**
 * What the host's model calls of a turn used: OpenClaw puts the provider's
 * counts on each assistant message it writes (`usage.input`, `output`,
 * `cacheRead`, `cacheWrite`). Summed over the turn's assistant messages;
 * undefined when none reported a token (so nothing is sent). Messages this
 * plugin assembled carry zeros and are skipped by name.
 */
export function turnUsage(messages: AgentMessage[]): TurnUsage | undefined {
  const sum: TurnUsage = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 };
  for (const message of messages as Record<string, any>[]) {
    if (message?.role !== "assistant" || message.model === "lcm-assembled") continue;
    const usage = message.usage;
    if (!usage || typeof usage !== "object") continue;
    sum.input_tokens = Math.min(MAX_TOKENS, sum.input_tokens + tokenCount(usage.input));
    sum.output_tokens = Math.min(MAX_TOKENS, sum.output_tokens + tokenCount(usage.output));
    sum.cache_read_tokens = Math.min(MAX_TOKENS, sum.cache_read_tokens + tokenCount(usage.cacheRead));
    sum.cache_write_tokens = Math.min(MAX_TOKENS, sum.cache_write_tokens + tokenCount(usage.cacheWrite));
  }
  return Object.values(sum).some((n) => n > 0) ? sum : undefined;
}

const ZERO_USAGE = {
  input: 0,
  output: 0,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 0,
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
};

/** The time range one assembled message covers (assemble with `include_times`). */
export type MessageTimes = { created_at: string; earliest_at: string; latest_at: string };

function millis(iso: string | undefined, fallback: number): number {
  const parsed = iso ? Date.parse(iso) : Number.NaN;
  return Number.isFinite(parsed) ? parsed : fallback;
}

function signsReasoning(block: Record<string, any>): boolean {
  return block.type === "redacted_thinking" || (block.type === "thinking" && Boolean(block.signature));
}

/**
 * Assembled lcm messages as pi agent messages, tool pairs kept in order.
 * `times` (aligned with `messages`) gives each message its original time;
 * without it (an older server) every message is stamped `now`. With `target`
 * (the model the context was assembled for), an assistant message that still
 * carries signed thinking is stamped with that model: lcm-server left in only
 * the signed thinking that model wrote, and the host replays thinking only to
 * the model a message names.
 */
export function fromLcm(messages: { role: string; content: unknown }[], times?: MessageTimes[] | null, now = Date.now(), target?: ReplayTarget): AgentMessage[] {
  const out: AgentMessage[] = [];
  const toolNames = new Map<string, string>();
  for (const [index, message] of messages.entries()) {
    const at = millis(times?.[index]?.created_at, now);
    const list = blocks(message.content);
    if (message.role === "assistant") {
      const content = list.map((b) => {
        if (b.type === "tool_use") {
          toolNames.set(b.id, b.name);
          return { type: "toolCall", id: b.id, name: b.name, arguments: b.input ?? {} };
        }
        if (b.type === "thinking") return { type: "thinking", thinking: b.thinking ?? "", ...(b.signature ? { thinkingSignature: b.signature } : {}) };
        if (b.type === "redacted_thinking") return { type: "thinking", thinking: "", thinkingSignature: b.data, redacted: true };
        return { type: "text", text: b.type === "text" ? String(b.text ?? "") : JSON.stringify(b) };
      });
      const usesTools = content.some((b) => b.type === "toolCall");
      const replayed = target?.model && list.some(signsReasoning);
      out.push({
        role: "assistant",
        content,
        api: "anthropic-messages",
        provider: replayed ? (target.provider ?? "lcm") : "lcm",
        model: replayed ? target.model : "lcm-assembled",
        usage: ZERO_USAGE,
        stopReason: usesTools ? "toolUse" : "stop",
        timestamp: at,
      });
      continue;
    }
    const userContent: Record<string, any>[] = [];
    for (const b of list) {
      if (b.type === "tool_result") {
        out.push({
          role: "toolResult",
          toolCallId: b.tool_use_id,
          toolName: toolNames.get(b.tool_use_id) ?? "unknown",
          content: [{ type: "text", text: typeof b.content === "string" ? b.content : textOf(b.content) }],
          isError: Boolean(b.is_error),
          timestamp: at,
        });
      } else if (b.type === "image" && b.source?.type === "base64") {
        userContent.push({ type: "image", data: b.source.data, mimeType: b.source.media_type });
      } else {
        userContent.push({ type: "text", text: b.type === "text" ? String(b.text ?? "") : JSON.stringify(b) });
      }
    }
    if (userContent.length > 0) out.push({ role: "user", content: userContent, timestamp: at });
  }
  return out;
}

/** The most of a prompt sent to assemble: lcm-server reads no further. */
export const PROMPT_MAX_CHARS = 20_000;

/**
 * The user's current message, what assemble sends as `prompt`: the host's
 * `prompt` (OpenClaw's embedded run hands the message being sent apart from
 * the history), else the newest user message of `messages` (a reassembly
 * inside a tool loop, where the message that started the loop is already in
 * them). Only its text, and at most PROMPT_MAX_CHARS of it.
 */
export function currentPrompt(prompt: string | undefined, messages: AgentMessage[]): string | undefined {
  let text = typeof prompt === "string" && prompt.trim() ? prompt : undefined;
  for (let i = messages.length - 1; text === undefined && i >= 0; i--) {
    const message = messages[i];
    if (message.role !== "user") continue;
    const found = blocks(message.content).filter((b) => b.type === "text").map((b) => String(b.text ?? "")).join("\n");
    text = found.trim() ? found : undefined;
    break;
  }
  return text === undefined ? undefined : text.slice(0, PROMPT_MAX_CHARS);
}

/** ~4 characters a token, the server's estimate for text. */
export function estimateTokens(messages: AgentMessage[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}
