// The web UI of `otelprof serve` in Debian's Chromium, driven by Playwright (playwright-core,
// pinned in package.json, installed by scripts/test.sh under target/; no browser download).
// Run by tests/tests/serve/browser.rs against a serve of a store written by real agents:
//   OTELPROF_UI=http://127.0.0.1:PORT OTELPROF_REGRESSED=pkg.Class.method \
//   OTELPROF_SCREENSHOTS=docs/screenshots OTELPROF_CLI=target/release/otelprof \
//   OTELPROF_STORE=STORE NODE_PATH=target/browser-node/node_modules node tests/browser/serve_ui.js
// The focus fields and the butterfly view are focus_butterfly.js, checked against the CLI.
// Every check throws on failure (the process exits 1); nothing is skipped.
"use strict";
const assert = require("node:assert/strict");
const path = require("node:path");
const { chromium } = require("playwright-core");
const focusAndButterfly = require("./focus_butterfly.js");

const BASE = need("OTELPROF_UI");
const REGRESSED = need("OTELPROF_REGRESSED");
const SHOTS = need("OTELPROF_SCREENSHOTS");
const OPAMP_INSTANCE = need("OTELPROF_OPAMP_INSTANCE");
const VIEWPORT = { width: 1400, height: 900 };

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (see the header of ${__filename})`);
  return v;
}

function step(text) {
  console.log(`browser: ${text}`);
}

// A page that fails the test on any script error or failed API call.
async function open(browser) {
  const context = await browser.newContext({ viewport: VIEWPORT });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") errors.push(`console: ${m.text()}`); });
  page.on("response", (r) => { if (r.url().includes("/api/") && !r.ok()) errors.push(`${r.status()} ${r.url()}`); });
  page.errors = errors;
  return page;
}

function noErrors(page) {
  assert.deepEqual(page.errors, [], "the page reported errors");
}

async function shot(page, name, fullPage) {
  await page.screenshot({ path: path.join(SHOTS, name), fullPage: Boolean(fullPage) });
}

// What Explore answers: the header line, the first rows of the function table, the search status.
async function exploreAnswer(page) {
  await page.locator("#top-table tbody tr").first().waitFor();
  await page.locator("#timeline polygon").first().waitFor();
  return page.evaluate(() => ({
    header: document.querySelector("main p.meta").textContent,
    rows: Array.from(document.querySelectorAll("#top-table tbody tr")).slice(0, 5).map((r) => r.textContent),
    matched: (document.querySelector(".flamestatus") || {}).textContent || "",
  }));
}

function query(url) {
  return new URL(url).searchParams;
}

// Wall time by thread state: the top table's state columns, the flame graph coloured by
// state (picked from the keyboard), and the thread-state picker's selection.
async function threadStates(page) {
  step("Explore a wall profile: a column per thread state; colour the flame graph by state from the keyboard");
  await page.goto(`${BASE}/?type=wall&where=service.version%3D2.0`);
  await page.locator("#top-table tbody tr").first().waitFor();
  const heads = await page.locator("#top-table thead th").allTextContents();
  assert.ok(heads.includes("RUNNABLE"), `state columns: ${heads}`);
  const answer = await page.evaluate(() => fetch("/api/top?type=wall&where=service.version%3D2.0").then((r) => r.json()));
  assert.deepEqual(heads.slice(4, -1), answer.states.names, "the columns are not the answer's states");
  // Every row's state cells add up to its total (the cells are the API's numbers).
  for (const f of answer.functions.slice(0, 20)) {
    const sum = f.by_state.reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - f.total) <= 1e-6 * f.total + 1, `${f.name}: states ${sum} vs total ${f.total}`);
  }
  const picker = page.locator("select.flamecolor");
  await picker.focus();
  await page.keyboard.press("ArrowDown");
  await page.waitForURL((u) => u.searchParams.get("color") === "state");
  assert.ok((await page.locator("#flame .frame[data-state-color]").count()) >= 1, "no frame coloured by state");
  assert.match(await page.locator(".flamebar .meta").textContent(), /by state: RUNNABLE green/);
  await shot(page, "states.png", true);

  step("the thread-state picker selects one state: the total is that state's column");
  const runnable = answer.states.totals[answer.states.names.indexOf("RUNNABLE")];
  await page.selectOption("select[name='thread.state']", "RUNNABLE");
  await page.waitForURL((u) => u.searchParams.getAll("where").includes("thread.state=RUNNABLE"));
  await page.locator("#top-table tbody tr").first().waitFor();
  const only = await page.evaluate(() => fetch("/api/top" + location.search).then((r) => r.json()));
  assert.ok(Math.abs(only.header.total - runnable) <= 1e-6 * runnable + 1, `RUNNABLE ${only.header.total} vs column ${runnable}`);
  assert.equal(query(page.url()).get("color"), "state", "the colour left the URL");
  noErrors(page);
}

// The trend of the regressed method under Explore's timeline: picked from the keyboard (a row
// of the top table, Enter), drawn as the api's numbers in the timeline's buckets, kept in the
// URL, cleared with Escape; then picked again by clicking its frame in the flame graph.
async function checkTrend(page) {
  step("trend: Enter on the regressed method's row draws its share under the timeline");
  await page.goto(`${BASE}/?where=service.version%3D2.0`);
  await exploreAnswer(page);
  const row = page.locator("#top-table tbody tr").filter({ hasText: REGRESSED }).first();
  await row.focus();
  await page.keyboard.press("Enter");
  await page.locator("#trend svg").waitFor();
  assert.equal(query(page.url()).get("trend"), REGRESSED, "the trend is not in the URL");
  const drawn = await page.evaluate(() => Array.from(document.querySelectorAll("#trend rect"))
    .map((r) => r.getAttribute("data-value")));
  const answers = await page.evaluate(async (fn) => {
    const get = async (path) => (await fetch(path)).json();
    const where = "where=service.version%3D2.0";
    return {
      trend: await get(`/api/trend?${where}&trend=${encodeURIComponent(fn)}`),
      timeline: await get(`/api/timeline?${where}&by=span_name`),
    };
  }, REGRESSED);
  const { trend, timeline } = answers;
  assert.deepEqual(trend.times, timeline.times, "the trend's buckets are not the timeline's");
  assert.deepEqual(drawn, trend.points.map((p) => (p.share == null ? "" : String(p.share))),
    "the bars drawn are not the api's shares");
  const shares = trend.points.map((p) => p.share).filter((s) => s != null);
  assert.ok(shares.length >= 2 && shares.every((s) => s >= 0 && s <= 1), `shares: ${shares}`);
  assert.ok(shares.some((s) => s > 0), `the regressed method has no share: ${shares}`);
  assert.ok(trend.functions.some((f) => f.name === REGRESSED), JSON.stringify(trend.functions));
  await shot(page, "trend.png");
  // The demo's shop sends the HTTP server duration histogram: time per request, from the
  // keyboard, is the api's per_request.
  assert.equal(trend.requests, true, "the demo store has no request counts");
  await page.locator("#trend-toggle").focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => document.querySelector("#trend").getAttribute("data-measure") === "per_request");
  const perRequest = await page.evaluate(() => Array.from(document.querySelectorAll("#trend rect"))
    .map((r) => r.getAttribute("data-value")));
  assert.deepEqual(perRequest, trend.points.map((p) => (p.per_request == null ? "" : String(p.per_request))),
    "the bars drawn are not the api's times per request");
  assert.ok(perRequest.some((v) => Number(v) > 0), `no time per request: ${perRequest}`);

  step("trend: the URL opened afresh draws it; Escape on the chart clears it and the URL");
  await page.goto(page.url());
  await page.locator("#trend svg").waitFor();
  await page.locator("#trend").focus();
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.querySelector("#trend"));
  assert.equal(query(page.url()).get("trend"), null, "the cleared trend stayed in the URL");

  step("trend: clicking the method's frame in the flame graph picks it");
  await page.locator("#flame .frame").filter({ hasText: REGRESSED }).first().click();
  await page.locator("#trend svg").waitFor();
  assert.equal(query(page.url()).get("trend"), REGRESSED);
  noErrors(page);
}

async function main() {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true });
  try {
    const page = await open(browser);

    step("Explore: timeline, flame graph and top table of the head version");
    await page.goto(`${BASE}/?where=service.version%3D2.0`);
    const first = await exploreAnswer(page);
    assert.match(first.header, /\S/, "Explore shows no header");
    assert.ok(first.rows.length >= 3, `top table has ${first.rows.length} rows`);

    step("the heap after GC is a line over the timeline, a step across each bucket the api has a figure for");
    const line = page.locator("#heap-line");
    await line.waitFor({ state: "attached" });
    const drawn = (await line.getAttribute("points")).trim().split(/\s+/).length;
    const tl = await page.evaluate(async () => {
      const r = await fetch("/api/timeline?where=service.version%3D2.0&by=span_name");
      return r.json();
    });
    const heapPoints = tl.memory.heap_after_gc.filter((v) => v !== null).length;
    assert.ok(heapPoints >= 1, `the api has ${heapPoints} heap points`);
    assert.equal(drawn, 2 * heapPoints, "the line is not a step across each bucket the api has a figure for");
    assert.match(await page.locator("#memory-legend").textContent(), /heap after GC \(line; top = .+\); GC pauses [\d.]+ s/);

    step("search a frame from the keyboard ('/' focuses the search box): the matched share shows");
    await page.locator("main p.meta").click(); // focus on the page, not in a form control
    await page.keyboard.press("/");
    assert.equal(await page.evaluate(() => document.activeElement.className), "flamesearch");
    const method = REGRESSED.split(".").pop();
    await page.keyboard.type(method);
    const status = page.locator(".flamestatus[data-matched]");
    await status.waitFor();
    const matched = await status.textContent();
    const share = /\(([\d.]+)% of all\)/.exec(matched);
    assert.ok(share && Number(share[1]) > 0 && Number(share[1]) <= 100, `matched share: ${matched}`);
    assert.ok(Number(await status.getAttribute("data-matched")) >= 1, matched);
    assert.ok((await page.locator("#flame .frame.match").count()) >= 1, "no frame highlighted");
    assert.equal(query(page.url()).get("search"), method, "the search is not in the URL");
    await shot(page, "explore.png");

    step("the Findings panel of the same selection (compared with the CLI by findings_ui.js)");
    await page.waitForSelector("#findings[data-state=done]", { timeout: 60000 });
    assert.ok((await page.locator("#findings li.finding, #no-findings").count()) >= 1, "the Findings panel is empty");
    // The panel at the top of the window, the flame graph below it.
    await page.evaluate(() => document.getElementById("findings").scrollIntoView());
    await shot(page, "findings.png");
    await page.evaluate(() => window.scrollTo(0, 0));

    step("drag a time range on the timeline: from/to enter the URL and the answer changes");
    const box = await page.locator("#timeline").boundingBox();
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + 0.35 * box.width, y);
    await page.mouse.down();
    await page.mouse.move(box.x + 0.5 * box.width, y, { steps: 5 });
    await page.mouse.move(box.x + 0.65 * box.width, y, { steps: 5 });
    await page.mouse.up();
    await page.waitForURL((u) => u.searchParams.has("from") && u.searchParams.has("to"));
    const zoomedUrl = page.url();
    const from = Date.parse(query(zoomedUrl).get("from"));
    const to = Date.parse(query(zoomedUrl).get("to"));
    assert.ok(from < to, `from ${from} to ${to}`);
    await page.waitForFunction((old) => {
      const h = document.querySelector("main p.meta");
      return h && h.textContent !== old && document.querySelector("#top-table tbody tr");
    }, first.header);
    const zoomed = await exploreAnswer(page);
    assert.notEqual(zoomed.header, first.header, "the answer did not change with the range");
    assert.equal((await page.locator("input[name=from]").inputValue()), query(zoomedUrl).get("from"));
    noErrors(page);

    step("follow the shared URL in a fresh browser context: the same answer");
    const fresh = await open(browser);
    await fresh.goto(zoomedUrl);
    const again = await exploreAnswer(fresh);
    assert.deepEqual(again, zoomed, "a shared URL opened a different answer");
    noErrors(fresh);
    await fresh.context().close();

    await threadStates(page);
    await checkTrend(page);
    await focusAndButterfly(browser, { BASE, open, noErrors, shot, step }, {
      cli: need("OTELPROF_CLI"), store: need("OTELPROF_STORE"), regressed: REGRESSED,
      include: ["otelprof.demo.Catalog.*", "otelprof.demo.Shop.report"], hide: "java.*",
    });

    step("Traces: the list, then a trace opened from the keyboard (Tab to its row, Enter)");
    await page.click("nav a[data-view=traces]");
    await page.waitForURL(`${BASE}/traces`);
    const rows = page.locator("#traces-table tbody tr");
    await rows.first().waitFor();
    assert.ok((await rows.count()) >= 1);
    const traceId = (await rows.first().locator("td").last().textContent()).trim();
    assert.equal(traceId, need("OTELPROF_FIRST_TRACE"), "the first trace is not the first of `otelprof traces`");
    const endpoint = (await rows.first().locator("td").nth(3).textContent()).trim();
    assert.match(traceId, /^[0-9a-f]{32}$/, `trace id cell: ${traceId}`);
    await shot(page, "traces.png");
    await page.locator("main select").first().focus();
    let tabs = 0;
    while (!(await page.evaluate(() => document.activeElement.matches("#traces-table tbody tr")))) {
      assert.ok(++tabs < 60, "Tab never reached the first trace row");
      await page.keyboard.press("Tab");
    }
    await page.keyboard.press("Enter");
    // The link carries the time range of the trace's profiles, so the drilldown reads
    // the hour it lies in, not the store.
    await page.waitForURL((u) => u.pathname === `/trace/${traceId}` && u.searchParams.has("from") && u.searchParams.has("to"));
    await page.locator("#top-table tbody tr").first().waitFor();
    const summary = await page.locator("main pre.meta").textContent();
    // The same answer as `otelprof drilldown --trace-id`: it opens with the trace and its endpoint.
    assert.ok(summary.startsWith(`trace ${traceId}\nendpoint ${endpoint}`), `drilldown summary: ${summary}`);
    assert.equal(await page.locator("main h2").first().textContent(), `Trace ${traceId}`);
    await shot(page, "trace.png");
    noErrors(page);

    step("Compare: the two versions the store holds; the regressed method is the first row");
    await page.click("nav a[data-view=diff]");
    await page.waitForURL(`${BASE}/diff`);
    const base = page.locator("input[name=base]");
    await page.waitForFunction(() => document.querySelector("input[name=base]").value !== "");
    assert.equal(await base.inputValue(), "service.version=1.0");
    assert.equal(await page.locator("input[name=head]").inputValue(), "service.version=2.0");
    await page.click("form[aria-label=sides] button[type=submit]");
    await page.waitForURL((u) => u.pathname === "/diff" && u.searchParams.get("head") === "service.version=2.0");
    const firstRow = page.locator("#grew-table tbody tr").first();
    await firstRow.waitFor();
    const fn = (await firstRow.locator("td.name").first().textContent()).trim();
    assert.equal(fn, REGRESSED, "the first row of Grew is not the regressed method");
    const headline = await page.locator("#headline").textContent();
    assert.ok(headline.includes(method), `headline: ${headline}`);
    await shot(page, "compare.png");
    noErrors(page);

    step("the Compare URL, shared: the same first row and headline");
    const shared = await open(browser);
    await shared.goto(page.url());
    await shared.locator("#grew-table tbody tr").first().waitFor();
    assert.equal(await shared.locator("#headline").textContent(), headline);
    assert.equal((await shared.locator("#grew-table tbody tr td.name").first().textContent()).trim(), REGRESSED);
    await shared.context().close();

    step("Instances: both JVMs of the demo");
    await page.click("nav a[data-view=instances]");
    await page.waitForURL(`${BASE}/instances`);
    const jvms = page.locator("#instances-table tbody tr");
    await jvms.first().waitFor();
    assert.ok((await jvms.count()) >= 2, `instances: ${await jvms.count()}`);
    const text = await page.locator("#instances-table").textContent();
    assert.ok(text.includes("1.0") && text.includes("2.0"), text);

    step("Instances: the OpAMP agent is listed; a capture starts from the keyboard and runs");
    const agentRow = page.locator("#agents-table tbody tr").filter({ hasText: OPAMP_INSTANCE });
    await agentRow.waitFor();
    assert.match(await agentRow.textContent(), /python-shop/);
    assert.match(await agentRow.textContent(), /healthy: profiling cpu/);
    await page.fill("input[name=capture-wall]", "25ms");
    await page.fill("input[name=capture-seconds]", "3");
    await page.locator("input[name=capture-seconds]").focus();
    tabs = 0;
    while (!(await page.evaluate(() => document.activeElement.matches("#agents-table button.capture")))) {
      assert.ok(++tabs < 20, "Tab never reached the capture button");
      await page.keyboard.press("Tab");
    }
    await page.keyboard.press("Enter");
    const queued = page.locator("#capture-status[data-capture]");
    await queued.waitFor();
    const captureId = await queued.getAttribute("data-capture");
    const latest = agentRow.locator("td.latest");
    await page.waitForFunction((id) => {
      const c = document.querySelector("#agents-table td.latest");
      return c && c.getAttribute("data-capture") === id && c.getAttribute("data-state") === "running";
    }, captureId, { timeout: 20000 });
    assert.match(await latest.textContent(), /wall=25ms, 3 s\): running until/);
    await shot(page, "instances.png");
    await page.waitForFunction(() => document.querySelector("#agents-table td.latest").getAttribute("data-state") === "done", null, { timeout: 20000 });

    step("continuous settings for the agent: applied, and the row says so");
    await page.fill("input[name=settings]", "wall=50ms");
    await agentRow.locator("button.settings").click();
    await page.waitForFunction(() => /asked: wall=50ms, applied\)/.test(document.querySelector("#agents-table tbody tr").textContent), null, { timeout: 20000 });

    step("a capture out of bounds is refused with the reason, nothing queued");
    await page.fill("input[name=capture-wall]", "1ms");
    await agentRow.locator("button.capture").click();
    await page.waitForFunction(() => /^refused: .*5ms/.test(document.querySelector("#capture-status").textContent));
    // The refusal is the API's 400 (which Chromium also logs), expected here and nowhere else.
    const expected = [/^400 .*\/api\/agents\/capture$/, /^console: Failed to load resource: .* 400 \(Bad Request\)$/];
    assert.deepEqual(page.errors.filter((e) => !expected.some((r) => r.test(e))), [], "the page reported errors");
  } finally {
    await browser.close();
  }
  step("all views checked");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
