/**
 * The lcm-server HTTP client. Every request is bounded by a timeout and made
 * once: a failure surfaces as an LcmError at once, and OpenClaw falls back for
 * that call (its own pipeline messages for assemble; a failed commit stays in
 * its durable outbox and is replayed on a later turn). A timeout or refused
 * connection opens the shared circuit breaker (breaker.ts): later calls fail
 * at once with code `circuit_open` until its cool-down ends.
 * A request is sent again only when its kept-alive connection turned out to
 * be closed before any answer (see isStaleConnection); nothing else is
 * retried here: a 4xx (400, 404, 409, 413) is a verdict, and retrying after a
 * timeout is the host's decision (commitTurn retries are safe because the
 * server keys them by the advancement key).
 */
import { CircuitBreaker, CircuitOpenError } from "./breaker.ts";

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

/** The socket closed under a request before any answer: a stale kept-alive connection. */
function isStaleConnection(error: unknown): boolean {
  const code = (error as { cause?: { code?: string } })?.cause?.code;
  return code === "UND_ERR_SOCKET" || code === "ECONNRESET" || code === "EPIPE";
}

export interface ClientOptions {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  breakerCooldownMs?: number;
}

/** What one request cost on the wire (the plugin benchmark reads these). */
export type RequestStats = { requests: number; bytesSent: number; bytesReceived: number };

export class LcmClient {
  private readonly opts: ClientOptions;
  private readonly inflight = new Set<AbortController>();
  readonly breaker: CircuitBreaker;
  readonly stats: RequestStats = { requests: 0, bytesSent: 0, bytesReceived: 0 };

  /** `breaker`: share one across the engines and tools of a registration (see breaker.ts). */
  constructor(opts: ClientOptions, breaker?: CircuitBreaker) {
    this.opts = opts;
    this.breaker = breaker ?? new CircuitBreaker(opts.breakerCooldownMs ?? 30_000);
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
    const where = `${method} ${path}`;
    let ticket: { probe: boolean };
    try {
      ticket = this.breaker.admit();
    } catch (error) {
      if (error instanceof CircuitOpenError) throw new LcmError(`${error.message} [${where}]`, null, "circuit_open");
      throw error;
    }
    const controller = new AbortController();
    this.inflight.add(controller);
    const timer = setTimeout(() => controller.abort(new Error("timeout")), timeoutMs);
    const onAbort = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    let response: Response;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    this.stats.requests += 1;
    this.stats.bytesSent += payload === undefined ? 0 : Buffer.byteLength(payload);
    let answered = false;
    const send = () =>
      fetch(this.opts.baseUrl + path, {
        method,
        headers: {
          authorization: `Bearer ${this.opts.apiKey}`,
          ...(payload === undefined ? {} : { "content-type": "application/json" }),
        },
        body: payload,
        signal: controller.signal,
      });
    try {
      try {
        response = await send();
      } catch (error) {
        // A kept-alive connection the server closed while idle (its keep-alive
        // timeout) can be picked for this request just as it goes: the request
        // never reached the server. Sent again once, on a new connection.
        // Safe for every call: writes are keyed (client ids, advancement keys).
        if (controller.signal.aborted || !isStaleConnection(error)) throw error;
        response = await send();
      }
      const text = await response.text();
      answered = true;
      this.breaker.succeeded(ticket);
      this.stats.bytesReceived += Buffer.byteLength(text);
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
      if (answered) throw error; // an HTTP verdict (LcmError) or a body that is not JSON
      if (options.signal?.aborted) {
        this.breaker.released(ticket);
        throw new LcmError(`lcm-server ${where} aborted by the host`, null, "aborted");
      }
      if (controller.signal.aborted && controller.signal.reason?.message === "disposed") {
        this.breaker.released(ticket);
        throw new LcmError(`lcm-server ${where} aborted: the engine was disposed`, null, "aborted");
      }
      if (controller.signal.aborted) {
        this.breaker.failed(ticket, `timed out after ${timeoutMs} ms`);
        throw new LcmError(`lcm-server ${where} timed out after ${timeoutMs} ms (${this.opts.baseUrl})`, null, "timeout");
      }
      const cause = (error as { cause?: { code?: string } })?.cause?.code ?? String(error);
      this.breaker.failed(ticket, `unreachable: ${cause}`);
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
