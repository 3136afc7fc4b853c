/**
 * A circuit breaker in front of lcm-server, shared by every engine and tool of
 * one plugin registration.
 *
 * Why: OpenClaw calls the engine three or four times a turn (bootstrap,
 * assemble, commit). Against a server that accepts connections but never
 * answers, each call would wait the whole `timeoutMs`, on every turn. The
 * breaker opens on the first timeout or refused connection: from then on a
 * call fails at once (OpenClaw falls back per call, and keeps failed commits
 * in its durable outbox), until `cooldownMs` has passed. The first call after
 * the cool-down is the probe: it goes through alone (others keep failing fast
 * while it is in flight); success closes the breaker, failure opens it for
 * another cool-down. A hung server so costs at most one timeout per cool-down.
 *
 * Only the transport trips it: an HTTP answer (even a 5xx) proves the server
 * is there and answering quickly, and a host abort is the host's choice.
 */

export type BreakerState = "closed" | "open" | "half-open";

export class CircuitOpenError extends Error {
  readonly retryInMs: number;
  constructor(message: string, retryInMs: number) {
    super(message);
    this.name = "CircuitOpenError";
    this.retryInMs = retryInMs;
  }
}

export class CircuitBreaker {
  private readonly cooldownMs: number;
  private readonly now: () => number;
  private openedAt: number | null = null;
  private probing = false;
  private lastCause = "";

  constructor(cooldownMs: number, now: () => number = Date.now) {
    this.cooldownMs = cooldownMs;
    this.now = now;
  }

  get state(): BreakerState {
    if (this.openedAt === null) return "closed";
    return this.now() - this.openedAt >= this.cooldownMs ? "half-open" : "open";
  }

  /**
   * Ask to send one request: returns a ticket to hand back to `succeeded`,
   * `failed` or `released`, or throws CircuitOpenError at once while open.
   */
  admit(): { probe: boolean } {
    if (this.openedAt === null) return { probe: false };
    const waited = this.now() - this.openedAt;
    if (waited < this.cooldownMs || this.probing) {
      const retryInMs = Math.max(0, this.cooldownMs - waited);
      throw new CircuitOpenError(
        `lcm-server circuit open (${this.lastCause}); not calling it for another ${Math.ceil(retryInMs / 1000)} s`,
        retryInMs,
      );
    }
    // One probe at a time: JavaScript runs this check and set without a gap.
    this.probing = true;
    return { probe: true };
  }

  /** The server answered (any HTTP status): close. */
  succeeded(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
    this.openedAt = null;
  }

  /** The transport failed (timeout, refused, reset): open for a cool-down. */
  failed(ticket: { probe: boolean }, cause: string): void {
    if (ticket.probe) this.probing = false;
    this.openedAt = this.now();
    this.lastCause = cause;
  }

  /** The request ended without a verdict on the server (host abort): release the probe. */
  released(ticket: { probe: boolean }): void {
    if (ticket.probe) this.probing = false;
  }
}
