/** Shared by the plugin tests: the real lcm-server the pytest driver started. */
import { resolveConfig } from "../src/config.ts";

export { switchableProxy } from "./proxies.ts";

export const LCM_URL = process.env.LCM_URL ?? "";
export const LCM_KEY = process.env.LCM_KEY ?? "";
if (!LCM_URL || !LCM_KEY) throw new Error("run through tests/e2e/test_openclaw_plugin.py (LCM_URL, LCM_KEY)");

export function config(extra: Record<string, unknown> = {}) {
  return resolveConfig({ baseUrl: LCM_URL, apiKey: LCM_KEY, timeoutMs: 5000, ...extra });
}

export function unique(name: string): string {
  return `${name}-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e6)}`;
}

export async function lcm(method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(LCM_URL + path, {
    method,
    headers: { authorization: `Bearer ${LCM_KEY}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json().catch(() => null) };
}

let clock = Date.UTC(2026, 10, 1);
export function userMsg(text: string) {
  return { role: "user", content: text, timestamp: (clock += 1000) };
}
export function assistantMsg(text: string, toolCall?: { id: string; name: string; arguments: Record<string, unknown> }) {
  const content: any[] = [{ type: "text", text }];
  if (toolCall) content.push({ type: "toolCall", ...toolCall });
  return {
    role: "assistant",
    content,
    api: "anthropic-messages",
    provider: "fake",
    model: "fake-model",
    usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
    stopReason: toolCall ? "toolUse" : "stop",
    timestamp: (clock += 1000),
  };
}
export function toolResultMsg(toolCallId: string, toolName: string, text: string) {
  return { role: "toolResult", toolCallId, toolName, content: [{ type: "text", text }], isError: false, timestamp: (clock += 1000) };
}

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** An LcmClient that records each call's path, body and answer (what the engine does not return). */
export async function recordingClient(cfg: any) {
  const { LcmClient } = await import("../src/client.ts");
  const calls: { method: string; path: string; body: any; answer: any }[] = [];
  class Recording extends LcmClient {
    override async request<T>(method: string, path: string, body?: unknown, options?: any): Promise<T> {
      const answer = await super.request<T>(method, path, body, options);
      calls.push({ method, path, body, answer });
      return answer;
    }
  }
  return { client: new Recording(cfg), calls };
}

/**
 * A proxy to the real lcm-server whose first `resets` connections are reset
 * as soon as a request arrives on them (a kept-alive connection the server
 * closed while idle, picked for a request just as it went).
 */
export async function resettingProxy(target: string, resets: number) {
  const { createServer, connect } = await import("node:net");
  const upstream = new URL(target);
  const state = { resets, connections: 0 };
  const server = createServer((socket) => {
    state.connections += 1;
    socket.on("error", () => {});
    if (state.resets > 0) {
      state.resets -= 1;
      socket.once("data", () => socket.resetAndDestroy());
      return;
    }
    const out = connect(Number(upstream.port), upstream.hostname);
    out.on("error", () => socket.destroy());
    socket.pipe(out).pipe(socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as any).port}`, state, close: () => server.close() };
}
