/** TCP proxies in front of lcm-server for the tests and the plugin benchmark. */

/**
 * A TCP proxy to the real lcm-server that can be told to hang: in "hang" mode
 * it accepts connections and never answers (a hung server, not a down one).
 */
export async function switchableProxy(target: string) {
  const { createServer, connect } = await import("node:net");
  const upstream = new URL(target);
  const held = new Set<any>();
  const state = { mode: "forward" as "forward" | "hang" };
  const server = createServer((socket) => {
    held.add(socket);
    socket.on("close", () => held.delete(socket));
    socket.on("error", () => {});
    if (state.mode === "hang") return;
    const out = connect(Number(upstream.port), upstream.hostname);
    out.on("error", () => socket.destroy());
    socket.pipe(out).pipe(socket);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as any).port}`,
    set mode(mode: "forward" | "hang") {
      state.mode = mode;
      // Kept-alive connections would bypass the new mode: drop them.
      held.forEach((s) => s.destroy());
    },
    close() {
      held.forEach((s) => s.destroy());
      server.close();
    },
  };
}
