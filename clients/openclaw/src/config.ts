/** Plugin configuration (`plugins.entries.lcm.config` in openclaw.json). */

export type SessionKeySource = "sessionKey" | "sessionId";

export interface LcmConfig {
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  compactWaitMs: number;
  expandQueryTimeoutMs: number;
  sessionKeyPrefix: string;
  sessionKeySource: SessionKeySource;
  defaultTokenBudget: number;
  breakerCooldownMs: number;
}

const DEFAULTS = {
  baseUrl: "http://127.0.0.1:8000",
  timeoutMs: 10_000,
  compactWaitMs: 60_000,
  expandQueryTimeoutMs: 120_000,
  sessionKeyPrefix: "openclaw:",
  sessionKeySource: "sessionKey" as SessionKeySource,
  defaultTokenBudget: 200_000,
  breakerCooldownMs: 30_000,
};

function positive(value: unknown, fallback: number, name: string): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new Error(`lcm plugin config: ${name} must be a non-negative number`);
  }
  return value;
}

/** Validate raw config; missing fields take defaults, the key may come from $LCM_API_KEY. */
export function resolveConfig(raw: Record<string, unknown> | undefined, env = process.env): LcmConfig {
  const cfg = raw ?? {};
  const apiKey = (typeof cfg.apiKey === "string" && cfg.apiKey) || env.LCM_API_KEY || "";
  if (!apiKey) throw new Error("lcm plugin config: apiKey is required (or set LCM_API_KEY)");
  const source = cfg.sessionKeySource ?? DEFAULTS.sessionKeySource;
  if (source !== "sessionKey" && source !== "sessionId") {
    throw new Error("lcm plugin config: sessionKeySource must be 'sessionKey' or 'sessionId'");
  }
  return {
    baseUrl: String(cfg.baseUrl ?? env.LCM_API_URL ?? DEFAULTS.baseUrl).replace(/\/+$/, ""),
    apiKey,
    timeoutMs: positive(cfg.timeoutMs, DEFAULTS.timeoutMs, "timeoutMs"),
    compactWaitMs: positive(cfg.compactWaitMs, DEFAULTS.compactWaitMs, "compactWaitMs"),
    expandQueryTimeoutMs: positive(cfg.expandQueryTimeoutMs, DEFAULTS.expandQueryTimeoutMs, "expandQueryTimeoutMs"),
    sessionKeyPrefix: typeof cfg.sessionKeyPrefix === "string" ? cfg.sessionKeyPrefix : DEFAULTS.sessionKeyPrefix,
    sessionKeySource: source,
    defaultTokenBudget: positive(cfg.defaultTokenBudget, DEFAULTS.defaultTokenBudget, "defaultTokenBudget"),
    breakerCooldownMs: positive(cfg.breakerCooldownMs, DEFAULTS.breakerCooldownMs, "breakerCooldownMs"),
  };
}

/** The lcm session key (family) for an OpenClaw session. */
export function lcmSessionKey(cfg: LcmConfig, ids: { sessionKey?: string; sessionId?: string }): string {
  const own = cfg.sessionKeySource === "sessionId" ? ids.sessionId : (ids.sessionKey ?? ids.sessionId);
  if (!own) throw new Error("lcm: the host gave neither a sessionKey nor a sessionId");
  return cfg.sessionKeyPrefix + own;
}
