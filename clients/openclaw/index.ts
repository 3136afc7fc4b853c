/**
 * OpenClaw plugin: the `lcm` context engine (backed by lcm-server) and its
 * recall tools. Select it with `plugins.slots.contextEngine: "lcm"`.
 */
import { resolveConfig } from "./src/config.ts";
import { createLcmEngine, ENGINE_ID } from "./src/engine.ts";
import { createLcmTools } from "./src/tools.ts";

export { LcmClient, LcmError } from "./src/client.ts";
export { resolveConfig } from "./src/config.ts";
export { createLcmEngine, ENGINE_ID } from "./src/engine.ts";
export { createLcmTools } from "./src/tools.ts";

export default {
  id: ENGINE_ID,
  name: "Lossless Context Management (lcm-server)",
  description: "Context engine backed by lcm-server, with lcm_grep / lcm_describe / lcm_expand / lcm_expand_query",
  register(api: any) {
    const config = () => resolveConfig(api.pluginConfig);
    api.registerContextEngine(ENGINE_ID, () => createLcmEngine(config()));
    api.registerTool((ctx: { sessionKey?: string; sessionId?: string }) => createLcmTools(config(), ctx), {
      names: ["lcm_grep", "lcm_describe", "lcm_expand", "lcm_expand_query"],
    });
  },
};
