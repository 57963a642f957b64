// The Leaks view of `otelprof serve` in Debian's Chromium (playwright-core, as serve_ui.js).
// Run by tests/tests/agent/leaks.rs against a serve of a real JVM's live-heap snapshots:
//   OTELPROF_UI=http://127.0.0.1:PORT OTELPROF_LEAK_SITE='pkg.Class.method [byte[]]' (or
//   OTELPROF_LEAK_SITE=none) NODE_PATH=target/browser-node/node_modules node tests/browser/leaks_ui.js
// Every check throws on failure (the process exits 1).
"use strict";
const assert = require("node:assert/strict");
const { chromium } = require("playwright-core");

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (see the header of ${__filename})`);
  return v;
}

const BASE = need("OTELPROF_UI");
const SITE = need("OTELPROF_LEAK_SITE");

(async () => {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
    page.on("response", (r) => { if (r.url().includes("/api/") && !r.ok()) errors.push(`${r.status()} ${r.url()}`); });
    await page.goto(`${BASE}/`);
    // Reached from the navigation, as a user would.
    await page.click("nav a[data-view=leaks]");
    await page.waitForSelector("#leaks-table, #no-leaks", { timeout: 60000 });
    assert.equal(await page.title(), "otelprof: leaks");
    assert.equal(await page.getAttribute("nav a[data-view=leaks]", "aria-current"), "page");
    if (SITE === "none") {
      assert.equal(await page.locator("#leaks-table").count(), 0);
      assert.match(await page.textContent("#no-leaks"), /No leak candidates/);
      // The steady sites are still listed, below.
      assert.ok((await page.locator("#other-sites-table tbody tr").count()) > 0);
    } else {
      const first = await page.textContent("#leaks-table tbody tr:first-child td:last-child");
      assert.equal(first.trim(), SITE);
    }
    assert.deepEqual(errors, []);
    console.log(`browser: the Leaks view shows ${SITE === "none" ? "no candidates" : SITE + " first"}`);
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
