// The focus fields and the butterfly view of `otelprof serve`, checked against the CLI on the
// same store: run from serve_ui.js (same Chromium, same serve), which passes its helpers.
// The CLI is the real binary (OTELPROF_CLI) over the served store (OTELPROF_STORE): every
// number the page shows here is compared with what `otelprof top`, `callers` or `callees`
// print for the flags the page's URL holds.
"use strict";
const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");

// The CLI's flags for a page URL's parameters (the same mapping the server makes).
const FLAGS = ["where", "type", "value", "from", "to", "trace_id", "span_id", "include", "exclude", "hide", "depth", "min"];
function flags(params) {
  const out = [];
  for (const [k, v] of params) if (FLAGS.includes(k)) out.push(`--${k.replace("_", "-")}=${v}`);
  return out;
}

function cli(env, args) {
  try {
    return { code: 0, out: execFileSync(env.cli, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
  } catch (e) {
    return { code: e.status, out: String(e.stdout || ""), err: String(e.stderr || "") };
  }
}

// `otelprof callers|callees` output: per function its share of all, and its rows as
// [level, share, name] (a level-n row starts with 2n spaces, then the share in six columns).
function parseTrees(text) {
  const functions = {};
  let current = null;
  for (const line of text.split("\n")) {
    const head = /^(.+?)  .* \(([\d.]+)% of all\), its (callers|callees):$/.exec(line);
    if (head) { current = { share: head[2], rows: [] }; functions[head[1]] = current; continue; }
    const row = /^ *([\d.]+)%  (.*)$/.exec(line);
    if (current && row) current.rows.push([(line.indexOf("%") - 6) / 2, row[1], row[2]]);
  }
  return functions;
}

// What the butterfly view shows, in the same shape, per half.
async function shownTrees(page) {
  return page.evaluate(() => {
    const halves = { callers: {}, callees: {} };
    for (const s of document.querySelectorAll("#butterfly section.function")) {
      const share = /\(([\d.]+)% of all\)/.exec(s.querySelector("h2").textContent)[1];
      for (const word of ["callers", "callees"]) {
        const rows = Array.from(s.querySelectorAll(`ol[data-half=${word}] li`)).map((li) => {
          const pct = li.querySelector(".share").textContent;
          return [Number(li.getAttribute("data-level")), pct.replace("%", ""), li.textContent.slice(pct.length)];
        });
        halves[word][s.getAttribute("data-function")] = { share, rows };
      }
    }
    return halves;
  });
}

// The butterfly view at the page's URL equals `otelprof callers` and `otelprof callees`
// with the URL's flags.
async function sameAsCli(page, env) {
  await page.locator("#butterfly section.function ol li").first().waitFor();
  const params = new URL(page.url()).searchParams;
  const shown = await shownTrees(page);
  for (const word of ["callers", "callees"]) {
    const r = cli(env, [word, ...flags(params), "--", params.get("function"), env.store]);
    assert.equal(r.code, 0, `otelprof ${word}: ${r.err}`);
    const printed = parseTrees(r.out);
    assert.ok(Object.keys(printed).length >= 1, r.out);
    assert.deepEqual(shown[word], printed, `the ${word} shown differ from \`otelprof ${word}\`:\n${r.out}`);
  }
  return shown;
}

async function header(page, old) {
  await page.waitForFunction((o) => {
    const h = document.querySelector("main p.meta");
    return h && h.textContent !== o && document.querySelector("#top-table tbody tr");
  }, old);
  return page.locator("main p.meta").first().textContent();
}

async function tabTo(page, selector, most) {
  for (let tabs = 0; !(await page.evaluate((s) => document.activeElement.matches(s), selector)); tabs++) {
    assert.ok(tabs < most, `Tab never reached ${selector}`);
    await page.keyboard.press("Tab");
  }
}

module.exports = async function focusAndButterfly(browser, h, env) {
  const page = await h.open(browser);
  const start = `${h.BASE}/?where=service.version%3D2.0`;

  h.step("focus: Include and Hide from the keyboard; the totals are the CLI's with the same flags");
  await page.goto(start);
  const plain = await header(page, "");
  await page.locator("input[name=lines]").focus();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.name), "include", "Tab from lines does not reach Include");
  await page.keyboard.type(`${env.include[0]} ${env.include[1]}`);
  await page.keyboard.press("Tab");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.name), "hide");
  await page.keyboard.type(env.hide);
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.searchParams.getAll("include").length === 2);
  const focused = await header(page, plain);
  const url = new URL(page.url());
  assert.deepEqual(url.searchParams.getAll("include"), env.include, "repeated include= in the URL");
  assert.deepEqual(url.searchParams.getAll("hide"), [env.hide]);
  const top = cli(env, ["top", ...flags(url.searchParams), env.store]);
  assert.equal(top.code, 0, top.err);
  assert.equal(focused, top.out.split("\n")[0], "the focused header is not `otelprof top`'s");
  assert.notEqual(focused, plain, "focus changed nothing");
  // The timeline is of the focused selection too (compacted hours read their stacks).
  await page.locator("#timeline polygon").first().waitFor();
  const focusedRows = await page.locator("#top-table tbody tr").count();
  await h.shot(page, "focus.png");
  h.noErrors(page);

  h.step("focus: the URL round-trips (a fresh context shows the same fields and answer)");
  const fresh = await h.open(browser);
  await fresh.goto(page.url());
  assert.equal(await header(fresh, ""), focused);
  assert.equal(await fresh.locator("input[name=include]").inputValue(), env.include.join(" "));
  assert.equal(await fresh.locator("input[name=hide]").inputValue(), env.hide);
  assert.equal(await fresh.locator("#top-table tbody tr").count(), focusedRows);
  h.noErrors(fresh);
  await fresh.context().close();

  h.step("focus: moving to Compare keeps it; the diff is the CLI's with the same flags");
  await page.click("nav a[data-view=diff]");
  await page.waitForURL((u) => u.pathname === "/diff" && u.searchParams.getAll("include").length === 2);
  assert.equal(await page.locator("form[aria-label=sides] input[name=hide]").inputValue(), env.hide);
  await page.waitForFunction(() => document.querySelector("input[name=base]").value !== "");
  await page.click("form[aria-label=sides] button[type=submit]");
  await page.waitForURL((u) => u.searchParams.has("head") && u.searchParams.get("hide") === env.hide);
  await page.locator("#grew-table tbody tr").first().waitFor();
  const diffUrl = new URL(page.url());
  const diff = cli(env, ["diff", `--base=${diffUrl.searchParams.get("base")}`, `--head=${diffUrl.searchParams.get("head")}`, ...flags(diffUrl.searchParams), env.store]);
  assert.equal(diff.code, 0, diff.err);
  const headline = await page.locator("#headline").textContent();
  assert.ok(diff.out.includes(headline), `focused headline ${headline} is not \`otelprof diff\`'s:\n${diff.out}`);
  h.noErrors(page);

  h.step("focus: a trace's own fields (Hide, Enter): the drilldown is the CLI's with the flag");
  await page.goto(`${h.BASE}/traces`);
  await page.locator("#traces-table tbody tr").first().click();
  await page.waitForURL((u) => u.pathname.startsWith("/trace/"));
  await page.locator("#top-table tbody tr").first().waitFor();
  await page.locator("form[aria-label=focus] input[name=hide]").focus();
  await page.keyboard.type(env.hide);
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.pathname.startsWith("/trace/") && u.searchParams.get("hide") === env.hide);
  await page.locator("#top-table tbody tr").first().waitFor();
  const traceUrl = new URL(page.url());
  const drill = cli(env, ["drilldown", `--trace-id=${traceUrl.pathname.slice(7)}`, ...flags(traceUrl.searchParams), env.store]);
  assert.equal(drill.code, 0, drill.err);
  const summary = (await page.locator("main pre.meta").textContent()).split("\n").slice(0, 4).join("\n");
  assert.ok(drill.out.startsWith(summary), `drilldown summary:\n${summary}\nCLI:\n${drill.out}`);
  h.noErrors(page);

  h.step("focus: a bad pattern gets the CLI's error, in the page");
  const bad = await h.open(browser);
  await bad.goto(`${h.BASE}/?include=%20`);
  const alert = bad.locator("main .error[role=alert]").first();
  await alert.waitFor();
  const refused = cli(env, ["top", "--include= ", env.store]);
  assert.equal(refused.code, 1);
  assert.equal(`otelprof: ${await alert.textContent()}`, refused.err.trim().split("\n")[0], "not the CLI's error");
  await bad.context().close();

  h.step("butterfly: search the regressed method, Enter to its frame, c opens its callers and callees");
  await page.goto(start);
  await header(page, "");
  await page.locator("main p.meta").click();
  await page.keyboard.press("/");
  await page.keyboard.type(env.regressed.split(".").pop());
  await page.keyboard.press("Enter");
  // Frames show their source file beside the function: `pkg.Class.method (Class.java)`.
  const label = await page.evaluate(() => document.activeElement.textContent);
  assert.ok(label === env.regressed || label.startsWith(`${env.regressed} (`), `Enter in the search does not reach the matched frame: ${label}`);
  await page.keyboard.press("c");
  await page.waitForURL((u) => u.pathname === "/callers" && u.searchParams.get("function") === env.regressed);
  assert.equal(new URL(page.url()).searchParams.get("where"), "service.version=2.0", "the selection is not carried");
  const shown = await sameAsCli(page, env);
  assert.deepEqual(Object.keys(shown.callers), [label], JSON.stringify(shown));
  assert.ok(shown.callers[label].rows.length >= 2, JSON.stringify(shown));
  await h.shot(page, "butterfly.png");
  h.noErrors(page);

  h.step("butterfly: Tab to a caller, Enter re-centres on it (and it is the CLI's again)");
  const caller = shown.callers[label].rows[0][2];
  await tabTo(page, "ol[data-half=callers] a", 40);
  assert.equal(await page.evaluate(() => document.activeElement.textContent), caller);
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.searchParams.get("function") === caller.replace(/ \([^()]*\)$/, ""));
  await page.waitForFunction((c) => document.querySelector(`#butterfly section.function[data-function="${c}"]`), caller);
  await sameAsCli(page, env);

  h.step("butterfly: with focus (Hide) from the keyboard, still the CLI's");
  await page.locator("#butterfly input[name=hide]").focus();
  await page.keyboard.type(env.hide);
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.pathname === "/callers" && u.searchParams.get("hide") === env.hide);
  await page.waitForFunction(() => document.querySelector("#butterfly section.function"));
  await sameAsCli(page, env);

  h.step("butterfly: right click on a frame opens it too; Escape goes back to the flame graph");
  await page.goto(start);
  await header(page, "");
  await page.locator("#flame .frame", { hasText: env.regressed }).first().click({ button: "right" });
  await page.waitForURL((u) => u.pathname === "/callers" && u.searchParams.get("function") === env.regressed);
  await page.locator("#butterfly ol li").first().waitFor();
  await page.locator("#butterfly h2").first().click();
  await page.keyboard.press("Escape");
  await page.waitForURL((u) => u.pathname === "/" && u.searchParams.get("where") === "service.version=2.0" && !u.searchParams.has("function"));
  await page.locator("#top-table tbody tr").first().waitFor();
  h.noErrors(page);
  await page.context().close();
};
