// Drives the web chat in headless Chromium through playwright-core (no
// browser download: the Debian binary at VALET_TEST_CHROMIUM). Run by
// TestBrowserChat: node e2e.cjs <base URL> <screenshot path>. Exits 0 when
// every step passed, prints the failing step otherwise.
"use strict";
const { chromium } = require("playwright-core");

const [base, shot] = process.argv.slice(2);
const step = (name) => console.log("step: " + name);

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.VALET_TEST_CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("dialog", (d) => { pageErrors.push("a dialog opened: " + d.message()); d.dismiss(); });

    step("open ann's page");
    await page.goto(base + "/?user=ann");
    await page.waitForSelector("#who:has-text('ann')");

    step("send a message");
    await page.fill("#input", "What's the weather in Paris and Lyon? Email it to the team. <img src=x onerror=alert(1)>");
    await page.click("#send");
    await page.waitForSelector(".msg.user:has-text('<img src=x onerror=alert(1)>')"); // shown as text

    step("see the streamed text");
    await page.waitForSelector(".msg.assistant:has-text('Let me check both cities at once.')");

    step("see two tool cards side by side, running together");
    await page.waitForFunction(() => document.querySelectorAll(".tool-row .tool-card").length >= 2);
    await page.waitForFunction(() => document.querySelectorAll(".tool-card.done").length >= 2);
    // Side by side in one row, and running together: each started before
    // the other ended (the order of the stream's events, not a clock).
    const overlap = await page.evaluate(() => {
      const cards = [...document.querySelectorAll(".tool-card")].filter((c) => c.querySelector(".name").textContent === "get_weather");
      const n = (c, k) => Number(c.dataset[k]);
      return cards.length === 2 && cards[0].parentElement === cards[1].parentElement &&
        n(cards[0], "started") < n(cards[1], "ended") && n(cards[1], "started") < n(cards[0], "ended");
    });
    if (!overlap) throw new Error("the two get_weather cards are not side by side, running together: " + await page.evaluate(() => document.getElementById("log").outerHTML));
    const durations = await page.$$eval(".tool-card.done .status", (els) => els.map((e) => e.textContent));
    if (!durations.every((d) => / in \d+ ms/.test(d))) throw new Error("durations missing: " + durations.join(" | "));

    step("approve the drafted email by clicking");
    await page.waitForSelector(".approval-card:has-text('Send an email to team@example.com') button.approve");
    await page.click(".approval-card button.approve");

    step("see the final answer");
    await page.waitForSelector(".msg.assistant:has-text('Done: the forecast is on its way.')");
    await page.waitForSelector("#approvals .empty");

    step("add a scheduled task");
    await page.fill("#task-name", "Morning weather");
    await page.click("#task-add");
    await page.waitForSelector("#tasks li.task:has-text('Morning weather')");

    step("save a screenshot");
    await page.screenshot({ path: shot, fullPage: true });

    step("reload: the history comes back");
    await page.reload();
    await page.waitForSelector(".msg.assistant:has-text('Done: the forecast is on its way.')");

    step("bob's page shows none of it");
    const bob = await ctx.newPage();
    await bob.goto(base + "/?user=bob");
    await bob.waitForSelector("#who:has-text('bob')");
    await bob.waitForSelector("#tasks li.empty");
    await bob.waitForSelector("#approvals .empty");
    await bob.waitForTimeout(300); // let the history request land
    const leaked = await bob.evaluate(() => document.querySelectorAll(".msg, .tool-card, .approval-card, #tasks li.task").length);
    if (leaked !== 0) throw new Error(`bob's page shows ${leaked} of ann's items`);

    if (pageErrors.length) throw new Error("page errors: " + pageErrors.join("; "));
    console.log("ok");
  } finally {
    await browser.close();
  }
})().catch((err) => {
  console.error("FAILED: " + (err && err.stack || err));
  process.exit(1);
});
