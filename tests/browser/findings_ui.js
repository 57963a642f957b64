// The Findings panel of `otelprof serve`'s Explore view in Debian's Chromium (playwright-core,
// as serve_ui.js), against the real CLI (OTELPROF_CLI) on the served store (OTELPROF_STORE).
// Run by tests/tests/cli/findings_ui.rs over a JVM run that plants exceptions as control flow
// and regexes compiled per call:
//   OTELPROF_UI=http://127.0.0.1:PORT OTELPROF_CLI=target/release/otelprof OTELPROF_STORE=DIR \
//   NODE_PATH=target/browser-node/node_modules node tests/browser/findings_ui.js
// For the whole selection, for one narrowed from the focus fields (the regex's method
// excluded), for a clean one (only the arithmetic included) and against a baseline (the
// whole run, so every finding is marked as also there), what the panel shows must be
// what `otelprof findings --format json` prints for the URL's flags: the same findings in the
// same order, each with its rule, severity, title, cost, method, why, fix and evidence stacks.
// An evidence stack, followed, must open a flame graph holding that stack. Every check throws
// on failure (the process exits 1).
"use strict";
const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const { chromium } = require("playwright-core");

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (see the header of ${__filename})`);
  return v;
}

const BASE = need("OTELPROF_UI");
const CLI = need("OTELPROF_CLI");
const STORE = need("OTELPROF_STORE");

// The CLI's flags for a page URL's parameters (the mapping the server makes; the panel drops
// the parameters findings does not take).
const FLAGS = ["where", "type", "from", "to", "trace_id", "span_id", "include", "exclude", "hide", "new_against"];
function flags(url) {
  const out = [];
  for (const [k, v] of new URL(url).searchParams) if (FLAGS.includes(k)) out.push(`--${k.replaceAll("_", "-")}=${v}`);
  return out;
}

function cliFindings(url) {
  const args = ["findings", "--format", "json", ...flags(url), "--", STORE];
  const text = execFileSync(CLI, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  console.log(`$ otelprof ${args.join(" ")}\n${text}`);
  return JSON.parse(text);
}

async function panelDone(page) {
  await page.waitForSelector("#findings[data-state=done], #findings[data-state=error]", { timeout: 120000 });
  assert.equal(await page.getAttribute("#findings", "data-state"), "done", await page.textContent("#findings"));
}

// What the panel shows, one object per finding, in its order.
async function shown(page) {
  return page.evaluate(() => Array.from(document.querySelectorAll("#findings li.finding")).map((li) => {
    const text = (sel) => { const e = li.querySelector(sel); return e ? e.textContent : null; };
    return {
      rule: li.getAttribute("data-rule"),
      severity: text(".severity"),
      age: text(".age"),
      title: text(".title"),
      cost: text(".cost .text"),
      perRequest: text(".perrequest"),
      method: text(".method .text"),
      why: text(".why .text"),
      fix: text(".fix .text"),
      stacks: Array.from(li.querySelectorAll("a.evidence")).map((a) => a.getAttribute("title").split("\n").slice(1)),
    };
  }));
}

// What the panel must show for the CLI's answer `json`, formatted by the page's own `fmt`.
async function expected(page, json) {
  return page.evaluate((findings) => {
    const fmt = window.OtelprofFlame.fmt;
    return findings.map((f) => ({
      rule: f.rule,
      severity: f.severity,
      age: f.new == null ? null : f.new ? "new" : "also in the baseline",
      title: f.title,
      cost: `${(100 * f.share).toFixed(1)} % of ${f.of} (${fmt(f.value, f.unit)})`,
      perRequest: f.per_request == null ? null : `, ${fmt(f.per_request, f.unit)} per request`,
      method: f.method == null ? null : f.method + (f.file ? ` (${f.file})` : ""),
      why: f.why,
      fix: f.fix,
      stacks: f.stacks.map((s) => s.frames.slice().reverse()),
    }));
  }, json.findings);
}

async function sameAsCli(page, what) {
  await panelDone(page);
  const json = cliFindings(page.url());
  const want = await expected(page, json);
  const got = await shown(page);
  assert.deepEqual(got, want, `${what}: the panel differs from otelprof findings`);
  console.log(`${what}: ${got.length} findings, as the CLI: ${got.map((f) => `${f.rule} (${f.cost})`).join("; ") || "none"}`);
  return json;
}

// Whether the flame graph data `flame` (preorder: name index, depth) has a path from below
// the root equal to `frames` (root first); names compared without their source file.
function hasPath(flame, frames) {
  const bare = (n) => n.split(" (")[0];
  const path = [];
  for (let i = 0; i < flame.name.length; i++) {
    const d = flame.depth[i];
    path.length = d;
    path.push(bare(flame.names[flame.name[i]]));
    if (d === frames.length && path.slice(1).every((n, k) => n === frames[k])) return true;
  }
  return false;
}

(async () => {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    page.on("response", (r) => { if (r.url().includes("/api/") && !r.ok()) errors.push(`${r.status()} ${r.url()}`); });

    // The whole selection: both planted patterns.
    await page.goto(`${BASE}/`);
    const all = await sameAsCli(page, "whole selection");
    const rules = all.findings.map((f) => f.rule);
    for (const r of ["exceptions-control-flow", "regex-compiled-per-call"]) assert.ok(rules.includes(r), `no ${r}: ${rules}`);

    // Narrowed from the focus fields, from the keyboard: the regex's method excluded.
    const exclude = page.locator("form.controls input[name=exclude]");
    await exclude.focus();
    await page.keyboard.type("*$Validator.check");
    await page.keyboard.press("Enter");
    await page.waitForURL((u) => u.searchParams.get("exclude") === "*$Validator.check");
    const narrowed = await sameAsCli(page, "exclude *$Validator.check");
    const left = narrowed.findings.map((f) => f.rule);
    assert.ok(!left.includes("regex-compiled-per-call"), `the excluded pattern is still found: ${left}`);
    assert.ok(left.includes("exceptions-control-flow"), `the other pattern is lost: ${left}`);

    // A clean selection: the arithmetic alone.
    await page.goto(`${BASE}/?include=otelprof.tests.Findings.compute`);
    const clean = await sameAsCli(page, "include otelprof.tests.Findings.compute");
    assert.equal(clean.findings.length, 0);
    assert.match(await page.textContent("#no-findings"), /^No findings in this selection \(cpu: /);

    // Against a baseline (`new_against`, the CLI's --new-against) that holds the whole run:
    // every finding is marked "also in the baseline", as the CLI marks it.
    await page.goto(`${BASE}/?new_against=${encodeURIComponent("service.name!=none")}`);
    const marked = await sameAsCli(page, "new_against service.name!=none");
    assert.equal(marked.findings.length, all.findings.length);
    assert.ok(marked.findings.every((f) => f.new === false), "a finding of the baseline itself is new");

    // An evidence stack followed from the keyboard: Explore focused on it, whose flame graph
    // holds the stack's frames.
    await page.goto(`${BASE}/`);
    await panelDone(page);
    const f = all.findings[0];
    const stack = f.stacks[0];
    const top = page.waitForResponse((r) => r.url().includes("/api/top?"), { timeout: 120000 });
    await page.locator("#findings li.finding").first().locator("a.evidence").first().focus();
    await page.keyboard.press("Enter");
    await page.waitForURL((u) => u.searchParams.has("include"));
    const url = new URL(page.url());
    assert.equal(url.searchParams.get("type"), f.type);
    // Focused on the finding's method when the stack holds it, else on the stack's leaf.
    const leaf = stack.frames[stack.frames.length - 1];
    const anchor = stack.frames.includes(f.method) ? f.method : leaf;
    assert.deepEqual(url.searchParams.getAll("include"), [anchor]);
    assert.equal(url.searchParams.get("search"), leaf);
    const data = await (await top).json();
    assert.ok(hasPath(data.flame, stack.frames), `the flame graph lacks the evidence stack ${stack.frames.join(" > ")}`);
    await page.waitForSelector("#flame .frame");
    const names = await page.$$eval("#flame .frame", (es) => es.map((e) => e.textContent.split(" (")[0]));
    for (const name of [anchor, leaf]) assert.ok(names.includes(name), `the flame graph draws no frame ${name}`);
    assert.ok((await page.locator("#flame .frame.match").count()) >= 1, "the stack's leaf is not highlighted");
    console.log(`evidence stack of ${f.rule} opens Explore ${url.search}: its ${stack.frames.length} frames are in the flame graph`);

    assert.deepEqual(errors, []);
    console.log("findings panel checked");
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
