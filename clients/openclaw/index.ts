/**
 * OpenClaw plugin: the `lcm` context engine (backed by lcm-server), its
 * recall tools and the `/lcm` operator command. Select the engine with
 * `plugins.slots.contextEngine: "lcm"`.
 */
import { LcmClient } from "./src/client.ts";
import { runLcmCommand, USAGE } from "./src/commands.ts";
import { resolveConfig } from "./src/config.ts";
import { createLcmEngine, ENGINE_ID, PluginShared } from "./src/engine.ts";
import { createLcmTools } from "./src/tools.ts";

export { CircuitBreaker } from "./src/breaker.ts";
export { LcmClient, LcmError } from "./src/client.ts";
export { runLcmCommand } from "./src/commands.ts";
export { resolveConfig } from "./src/config.ts";
export { createLcmEngine, ENGINE_ID, PluginShared } from "./src/engine.ts";
export { createLcmTools } from "./src/tools.ts";

export default {
  id: ENGINE_ID,
  name: "Lossless Context Management (lcm-server)",
  description: "Context engine backed by lcm-server, with lcm_grep / lcm_describe / lcm_expand / lcm_expand_query and /lcm",
  register(api: any) {
    const config = () => resolveConfig(api.pluginConfig);
    // One breaker, cursor memory and assemble memory for every engine,
    // tool and command this registration creates (OpenClaw builds an
    // engine per operation: state kept on one would be lost at once).
    let shared: PluginShared | undefined;
    const sharedFor = (cfg: ReturnType<typeof config>) => (shared ??= new PluginShared(cfg));
    api.registerContextEngine(ENGINE_ID, () => {
      const cfg = config();
      return createLcmEngine(cfg, undefined, sharedFor(cfg));
    });
    api.registerTool(
      (ctx: { sessionKey?: string; sessionId?: string }) => {
        const cfg = config();
        return createLcmTools(cfg, ctx, new LcmClient(cfg, sharedFor(cfg).breaker));
      },
      { names: ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"] },
    );
    api.registerCommand?.({
      name: "lcm",
      description: `lcm-server for this session. ${USAGE}`,
      acceptsArgs: true,
      handler: async (ctx: { args?: string; sessionKey?: string; sessionId?: string }) => {
        const cfg = config();
        return await runLcmCommand(cfg, new LcmClient(cfg, sharedFor(cfg).breaker), ctx);
      },
    });
  },
};
