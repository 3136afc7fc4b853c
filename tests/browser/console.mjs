// The console in a real headless Chromium (playwright-core + @sparticuz/chromium).
// Run by tests/e2e/test_console.py, which starts `lcm serve`, builds a compacted
// conversation and passes what to expect in CONSOLE_CASE (JSON). Any failed
// check throws; the last stdout line is a JSON report.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import chromium from "@sparticuz/chromium";
import { chromium as playwright } from "playwright-core";

const c = JSON.parse(process.env.CONSOLE_CASE);
const shots = process.env.CONSOLE_SCREENSHOTS || "";
const report = { checks: [] };
const check = (name) => report.checks.push(name);

async function signIn(context, key) {
  const page = await context.newPage();
  await page.goto(`${c.base}/console/login`);
  await page.fill('input[name="api_key"]', key);
  await Promise.all([page.waitForLoadState("load"), page.click('button[type="submit"]')]);
  return page;
}

async function shot(page, name) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
}

const browser = await playwright.launch({
  executablePath: await chromium.executablePath(),
  args: chromium.args,
  headless: true,
});
try {
  // A key without the admin scope is refused at sign-in.
  const readOnly = await browser.newContext();
  const refused = await signIn(readOnly, c.read_key);
  assert.match(refused.url(), /\/console\/login$/);
  assert.match(await refused.textContent("#login-error"), /admin scope/);
  assert.equal((await readOnly.cookies()).filter((k) => k.name === "lcm_console").length, 0);
  check("read-only key refused");

  const a = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const page = await signIn(a, c.key_a);
  // The pages run under a strict Content-Security-Policy: nothing may be blocked.
  const blocked = [];
  page.on("console", (msg) => {
    if (/Content Security Policy/i.test(msg.text())) blocked.push(`${page.url()}: ${msg.text()}`);
  });
  assert.match(page.url(), /\/console\/conversations$/);
  const cookie = (await a.cookies()).find((k) => k.name === "lcm_console");
  assert.ok(cookie && cookie.httpOnly && cookie.sameSite === "Strict", JSON.stringify(cookie));
  assert.ok(!cookie.value.includes(c.key_a), "the cookie must not carry the key");
  check("signed in; cookie HttpOnly SameSite=Strict without the key");

  await page.fill('input[name="prefix"]', c.session_key.slice(0, 5));
  await Promise.all([page.waitForLoadState("load"), page.click(".filter button")]);
  const rows = await page.$$eval("#conversations tbody tr[data-conversation]", (trs) => trs.map((tr) => tr.dataset.conversation));
  assert.deepEqual(rows, [String(c.conversation_id)]);
  await shot(page, "console-conversations");
  check("conversations filtered by key prefix");

  await Promise.all([page.waitForLoadState("load"), page.click(`text=${c.session_key}`)]);
  assert.match(page.url(), new RegExp(`/console/conversations/${c.conversation_id}$`));
  const nodes = await page.$$eval("#dag-svg .node", (ns) => ns.map((n) => n.dataset.id));
  assert.deepEqual([...nodes].sort(), [...c.summary_ids].sort());
  const figures = await page.textContent("#window-figures");
  assert.match(figures, new RegExp(`fresh tail: ${c.fresh_tail_count} messages`));
  await page.hover(`#node-${c.top_id} circle`);
  const card = await page.textContent("#hover-card");
  assert.match(card, /condensed · depth \d+ · \d+ tokens/);
  assert.match(card, /descendants · fan-in \d+/);
  const tail = await page.$eval(".window-bar .seg.tail", (el) => el.getBoundingClientRect().width);
  assert.ok(tail > 0, "the window bar's widths are set by console.js");
  await shot(page, "console-conversation");
  check(`DAG shows all ${nodes.length} summaries; hover card`);

  // Down the DAG from the top node to a leaf, then to its original messages.
  await Promise.all([page.waitForLoadState("load"), page.click(`#node-${c.top_id} circle`)]);
  for (let hops = 0; hops < 10 && (await page.$(".source-summary")); hops++) {
    await Promise.all([page.waitForLoadState("load"), page.click(".source-summary >> nth=0")]);
  }
  assert.match(await page.textContent("#summary-title"), /leaf/);
  assert.ok((await page.$$("article.message")).length > 0);
  check("from the top summary down to a leaf's messages");

  await page.goto(`${c.base}/console/conversations/${c.conversation_id}`);
  await Promise.all([page.waitForLoadState("load"), page.click(`#node-${c.tool_leaf.id} circle`)]);
  const seqs = await page.$$eval("article.message", (as) => as.map((x) => Number(x.dataset.seq)));
  assert.deepEqual(seqs, c.tool_leaf.seqs);
  assert.equal(await page.textContent(".tool-call .tool-name"), "read_file");
  assert.match(await page.textContent(".tool-call pre"), /src\/file/);
  check("clicking a leaf shows its original messages with tool calls");

  await page.goto(`${c.base}/console/search`);
  await page.fill('input[name="q"]', c.marker);
  await Promise.all([page.waitForLoadState("load"), page.click("#search-form button")]);
  await shot(page, "console-search");
  await Promise.all([page.waitForLoadState("load"), page.click(".result.message a.hit >> nth=0")]);
  assert.ok(page.url().endsWith(`#m${c.marker_seq}`), page.url());
  const target = await page.$(".target article");
  assert.equal(await target.getAttribute("data-seq"), String(c.marker_seq));
  assert.match(await target.textContent(), new RegExp(c.marker));
  check("search lands on the marked message");

  // Summary surgery: the rewrite form on a summary's page (its CSRF token included).
  await page.goto(`${c.base}/console/summaries/${c.top_id}`);
  await page.click("#surgery > summary");
  await page.fill('#rewrite-form textarea[name="instructions"]', "Keep the file names.");
  await Promise.all([page.waitForLoadState("load"), page.click("#rewrite-form button")]);
  assert.match(await page.textContent("#done"), /rewrite-op_[0-9a-f]{16}-(pending|done)/);
  check("a summary's rewrite form asks for a leased rewrite");

  await page.goto(`${c.base}/console/live`);
  await shot(page, "console-live");
  const noToken = await a.request.post(`${c.base}/console/live/compact`, {
    form: { conversation_id: String(c.conversation_id) },
    maxRedirects: 0,
  });
  assert.equal(noToken.status(), 403);
  await page.fill('#compact-form input[name="conversation_id"]', String(c.conversation_id));
  await Promise.all([page.waitForLoadState("load"), page.click("#compact-form button")]);
  assert.match(await page.textContent("#done"), new RegExp(`compact-${c.conversation_id}`));
  check("POST without the CSRF token refused; the form with it works");
  assert.deepEqual(blocked, []);
  check("no Content-Security-Policy violation on any page");

  // Tenant B sees none of tenant A's pages.
  const b = await browser.newContext();
  const other = await signIn(b, c.key_b);
  assert.equal(await other.$(`text=${c.session_key}`), null);
  for (const path of [
    `/console/conversations/${c.conversation_id}`,
    `/console/conversations/${c.conversation_id}/messages?seq=1`,
    `/console/summaries/${c.top_id}`,
    `/console/summaries/${c.tool_leaf.id}`,
  ]) {
    const response = await other.goto(`${c.base}${path}`);
    assert.equal(response.status(), 404, path);
  }
  await other.goto(`${c.base}/console/search?q=${c.marker}`);
  assert.equal((await other.$$(".result")).length, 0);
  check("tenant B gets 404 for tenant A's pages and finds nothing of A's");

  const out = await other.request.post(`${c.base}/console/logout`, { form: {}, maxRedirects: 0 });
  assert.equal(out.status(), 403);
  await Promise.all([other.waitForLoadState("load"), other.click("header form button")]);
  assert.match(other.url(), /\/console\/login$/);
  const again = await other.goto(`${c.base}/console/conversations`);
  assert.match(again.url(), /\/console\/login$/);
  check("sign-out (CSRF-checked) ends the session");
} finally {
  await browser.close();
}
console.log(JSON.stringify(report));
