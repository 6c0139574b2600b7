// What the scripts that drive the real Studio page share: signing in through
// its form, finding an app in the sidebar and its two frames, and calling an
// app's tool on /mcp from the page itself, as the host does for an open app.

/**
 * A Studio page in a fresh browser context (its own cookie jar), logging its
 * console (with BROWSER_CONSOLE set) and errors under `label`, and accepting
 * every confirm() it asks. Answers `{label, page, dialogs}`, where `dialogs`
 * collects the questions asked.
 */
export async function newStudioPage(browser, label) {
  const context = await browser.newContext({ viewport: WIDE, locale: "en-GB", timezoneId: "Europe/London" });
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const record = { label, page, dialogs: [] };
  page.on("console", (message) => {
    if (process.env.BROWSER_CONSOLE) {
      console.log(`  [${label} console ${message.type()}] ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => console.log(`  [${label} page error] ${error.message}`));
  page.on("dialog", (dialog) => {
    record.dialogs.push(dialog.message());
    dialog.accept().catch(() => {});
  });
  return record;
}

/** Signs in through the Studio form and waits for the Apps sidebar. */
export async function signIn(page, user) {
  await page.getByLabel("User name").fill(user.username);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("navigation", { name: "Apps" }).waitFor();
}

/** The Apps sidebar. */
export function sidebar(page) {
  return page.getByRole("navigation", { name: "Apps" });
}

/** An app's sidebar link (each link starts with its app's name). */
export function appLink(page, name) {
  return sidebar(page).getByRole("link", { name: new RegExp(`^${name}\\b`) });
}

/** The outer (sandbox proxy) frame of the open app. */
export function outerFrame(page, name) {
  return page.getByTitle(`App: ${name}`, { exact: true });
}

/** The app's own view: the proxy's inner data: frame. */
export function innerFrame(page, name) {
  return outerFrame(page, name).contentFrame().getByTitle("App", { exact: true }).contentFrame();
}

/** Opens an app from the sidebar and waits until its view has initialized. */
export async function openApp(page, name) {
  await appLink(page, name).click();
  await page.getByText(`${name} is open.`).waitFor();
}

/**
 * Calls an app's tool on /mcp from the Studio page: the session cookie,
 * `Sasha-App`, the page's own Origin. Answers `{status, message}` with the
 * JSON-RPC response, read from JSON or an event stream.
 */
export function callTool(page, appId, name, args) {
  return page.evaluate(
    async ({ appId, name, args }) => {
      const response = await fetch("/mcp", {
        method: "POST",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json, text/event-stream",
          "MCP-Protocol-Version": "2026-07-28",
          "Mcp-Method": "tools/call",
          "Mcp-Name": name,
          "Sasha-App": appId,
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "tools/call",
          params: {
            name,
            arguments: args,
            _meta: {
              "io.modelcontextprotocol/protocolVersion": "2026-07-28",
              "io.modelcontextprotocol/clientCapabilities": {},
              "io.modelcontextprotocol/clientInfo": { name: "sasha-browser-tests", version: "1" },
            },
          },
        }),
      });
      const text = await response.text();
      let message = null;
      if ((response.headers.get("content-type") || "").startsWith("text/event-stream")) {
        for (const line of text.split(/\r?\n/)) {
          if (line.startsWith("data:")) {
            const data = JSON.parse(line.slice(5));
            if (data.id === 1) {
              message = data;
            }
          }
        }
      } else {
        message = JSON.parse(text);
      }
      return { status: response.status, message };
    },
    { appId, name, args },
  );
}

/** The viewports every screenshot is taken at: desktop and a 390 px phone. */
export const WIDE = { width: 1440, height: 900 };
export const NARROW = { width: 390, height: 844 };

/** Two animation frames: the page has laid itself out at its new size. */
function laidOut(page) {
  return page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

/** At phone widths the page scrolls vertically only; then back to the wide view. */
export async function fitsNarrow(page, checks, what) {
  // The phone widths people use most, from the narrowest.
  for (const width of [375, NARROW.width]) {
    await page.setViewportSize({ width, height: NARROW.height });
    await laidOut(page);
    // On overflow, the outermost elements that stick out say where to look.
    const widths = await page.evaluate(() => {
      const client = document.documentElement.clientWidth;
      const out = [...document.querySelectorAll("body *")].filter((element) => element.getBoundingClientRect().right > client + 1 && !(element.parentElement && element.parentElement.getBoundingClientRect().right > client + 1));
      const name = (element) => `${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ""}${element.classList.length ? `.${[...element.classList].join(".")}` : ""} in ${element.parentElement ? element.parentElement.className + ":" + getComputedStyle(element.parentElement).overflowX + ":" + Math.round(element.parentElement.getBoundingClientRect().right) : "?"}`;
      return { scroll: document.documentElement.scrollWidth, client, outermost: out.slice(0, 5).map(name) };
    });
    checks.ok(widths.scroll <= widths.client, `${what}: no horizontal overflow at ${width} px`, widths);
  }
  await page.setViewportSize(WIDE);
  await laidOut(page);
}

/**
 * Screenshots the page at both widths into `folder` as
 * `<name>-<width>x<height>.png` (scrolled so `subject` is in view, if given),
 * appends the files to `list` and restores the wide viewport.
 */
export async function screenshots(page, folder, name, list, subject = null) {
  for (const size of [WIDE, NARROW]) {
    await page.setViewportSize(size);
    await page.waitForTimeout(250);
    if (subject) {
      await subject.scrollIntoViewIfNeeded();
    }
    const file = `${folder}/${name}-${size.width}x${size.height}.png`;
    await page.screenshot({ path: file });
    list.push(file);
  }
  await page.setViewportSize(WIDE);
  await page.waitForTimeout(100);
}
