/**
 * The lcm-server HTTP client. Every request is bounded by a timeout and made
 * once: a failure surfaces as an LcmError at once, so OpenClaw can quarantine
 * the engine and fall back to its legacy engine instead of hanging a turn.
 * No request is retried here: a 4xx (400, 404, 409, 413) is a verdict, and
 * retrying a write is the host's decision (commitTurn retries are safe because
 * the server keys them by the advancement key).
 */

export class LcmError extends Error {
  readonly status: number | null;
  readonly code: string;
  constructor(message: string, status: number | null, code: string) {
    super(message);
    this.name = "LcmError";
    this.status = status;
    this.code = code;
  }
}

export interface ClientOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
}

export class LcmClient {
  private readonly opts: ClientOptions;
  private readonly inflight = new Set<AbortController>();

  constructor(opts: ClientOptions) {
    this.opts = opts;
  }

  conversationPath(sessionKey: string, action: string): string {
    return `/v1/conversations/${encodeURIComponent(sessionKey)}/${action}`;
  }

  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<T> {
    const timeoutMs = options.timeoutMs ?? this.opts.timeoutMs;
    const controller = new AbortController();
    this.inflight.add(controller);
    const timer = setTimeout(() => controller.abort(new Error("timeout")), timeoutMs);
    const onAbort = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    const where = `${method} ${path}`;
    let response: Response;
    try {
      response = await fetch(this.opts.baseUrl + path, {
        method,
        headers: {
          authorization: `Bearer ${this.opts.apiKey}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller.signal,
      });
      const text = await response.text();
      if (!response.ok) {
        let code = `http_${response.status}`;
        let message = text.slice(0, 500);
        try {
          const parsed = JSON.parse(text);
          code = parsed?.error?.code ?? code;
          message = parsed?.error?.message ?? message;
        } catch {
          // not JSON: keep the raw text
        }
        throw new LcmError(`lcm-server ${where} failed: ${response.status} ${code}: ${message}`, response.status, code);
      }
      return (text ? JSON.parse(text) : undefined) as T;
    } catch (error) {
      if (error instanceof LcmError) throw error;
      if (controller.signal.aborted && !options.signal?.aborted) {
        throw new LcmError(`lcm-server ${where} timed out after ${timeoutMs} ms (${this.opts.baseUrl})`, null, "timeout");
      }
      if (options.signal?.aborted) {
        throw new LcmError(`lcm-server ${where} aborted by the host`, null, "aborted");
      }
      const cause = (error as { cause?: { code?: string } })?.cause?.code ?? String(error);
      throw new LcmError(`lcm-server unreachable at ${this.opts.baseUrl} (${where}): ${cause}`, null, "unreachable");
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      this.inflight.delete(controller);
    }
  }

  /** Abort every request still in flight (engine disposal). */
  abortAll(): void {
    for (const controller of this.inflight) controller.abort(new Error("disposed"));
    this.inflight.clear();
  }
}
