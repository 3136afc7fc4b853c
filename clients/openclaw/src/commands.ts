/**
 * `/lcm status|compact|doctor`: operator commands for the current session,
 * registered with OpenClaw's `api.registerCommand` (they bypass the model).
 * Each calls the existing lcm-server endpoint and answers in plain text.
 */
import { LcmClient, LcmError } from "./client.ts";
import { type LcmConfig, lcmSessionKey } from "./config.ts";

type CommandContext = { args?: string; sessionKey?: string; sessionId?: string };
type Status = {
  conversation_id: number;
  session_key: string;
  messages: number;
  summaries: Record<string, number>;
  context_tokens: number;
  threshold_tokens: number;
  token_budget: number;
  debt: { status?: string; reason?: string } | null;
};
type Compacted = { status: string; context_tokens_before: number; context_tokens_after: number };
type Doctor = { broken: number; truncated: number; degraded: number };

export const USAGE = "Usage: /lcm status | /lcm compact | /lcm doctor";

function summaryLine(summaries: Record<string, number>): string {
  const depths = Object.entries(summaries).sort(([a], [b]) => Number(a) - Number(b));
  if (depths.length === 0) return "none";
  return depths.map(([depth, count]) => `${count} at depth ${depth}`).join(", ");
}

function failure(error: unknown): string {
  if (error instanceof LcmError && error.status === 404) return "lcm-server has stored nothing for this session yet.";
  if (error instanceof LcmError && error.status === 403) return `lcm-server refused: ${error.message} (this needs a key with the admin scope)`;
  return `lcm-server: ${(error as Error).message}`;
}

/** The handler of `/lcm …`: text for the user, never a throw. */
export async function runLcmCommand(cfg: LcmConfig, client: LcmClient, ctx: CommandContext): Promise<{ text: string }> {
  const [verb = "status"] = (ctx.args ?? "").trim().split(/\s+/).filter(Boolean);
  let session: string;
  try {
    session = lcmSessionKey(cfg, ctx);
  } catch {
    return { text: "This command needs a session: run it inside a conversation." };
  }
  const path = (action: string) => client.conversationPath(session, action);
  const budget = cfg.defaultTokenBudget;
  const query = `?token_budget=${budget}${ctx.sessionId ? `&session_id=${encodeURIComponent(ctx.sessionId)}` : ""}`;
  try {
    if (verb === "status") {
      const s = await client.request<Status>("GET", `${path("status")}${query}`);
      const owed = s.debt?.status && s.debt.status !== "done";
      const debt = owed ? `${s.debt!.reason ?? "compaction"} debt, ${s.debt!.status}` : "none";
      return {
        text: [
          `lcm ${s.session_key} (conversation ${s.conversation_id})`,
          `messages stored: ${s.messages}`,
          `summaries in context: ${summaryLine(s.summaries)}`,
          `context: ${s.context_tokens} tokens (threshold ${s.threshold_tokens} of a ${s.token_budget} budget)`,
          `compaction owed: ${debt}`,
        ].join("\n"),
      };
    }
    if (verb === "compact") {
      const out = await client.request<Compacted>("POST", path("compact"), { token_budget: budget, wait: cfg.compactWaitMs / 1000 }, { timeoutMs: cfg.compactWaitMs + cfg.timeoutMs });
      return { text: `lcm compaction ${out.status}: ${out.context_tokens_before} -> ${out.context_tokens_after} tokens` };
    }
    if (verb === "doctor") {
      const s = await client.request<Status>("GET", `${path("status")}${query}`);
      const d = await client.request<Doctor>("GET", `/v1/tenant/doctor?conversation_id=${s.conversation_id}`);
      const healthy = d.broken + d.truncated + d.degraded === 0;
      return {
        text: `lcm doctor, conversation ${s.conversation_id}: ${d.broken} broken, ${d.truncated} truncated, ${d.degraded} degraded summaries${healthy ? " (healthy)" : "; repair with `lcm doctor --apply` or POST /v1/tenant/doctor/apply"}`,
      };
    }
  } catch (error) {
    return { text: failure(error) };
  }
  return { text: USAGE };
}
