// The Temporal Web UI, as an operator uses it, in headless Chromium (Debian's, driven by
// playwright-core): the run list filtered on the runs' search attributes, and a run's own page.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Browser, chromium } from 'playwright-core';
import { createScriptedProvider, freePort } from '../../src/testing';
import {
  eventually,
  newService,
  startTestServer,
  startWorker,
  TestServer,
  text,
  uniqueName,
} from '../helpers/temporal';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** How long a page of the UI may take to show what the test looks for. */
const UI_WAIT_MS = 100_000;
let temporal: TestServer;
let stopWorker: () => Promise<void>;
let browser: Browser;
const scripted = createScriptedProvider({ name: uniqueName('ui') });

beforeAll(async () => {
  temporal = await startTestServer({ uiPort: await freePort() });
  stopWorker = await startWorker(temporal, [scripted]);
  // A fresh profile per launch; the flags keep Chromium off the network this machine does not have.
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await stopWorker?.();
  await temporal?.close();
});

it(
  'lists runs filtered on their search attributes and shows a run’s page',
  async () => {
    const service = newService(temporal);
    service.registerProvider(scripted);
    const run = service.start(scripted.name, { prompt: text('visible in the UI'), parent: { id: 'p' } });
    await run.result;

    // The list reads visibility, which follows the run's history a moment later.
    const filter = `SubagentProvider="${scripted.name}" AND SubagentStatus="parked"`;
    await eventually(async () => ((await temporal.client.workflow.count(filter)).count > 0 ? true : undefined));
    const page = await browser.newPage();
    const query = encodeURIComponent(filter);
    await page.goto(`${temporal.server.uiUrl}/namespaces/default/workflows?query=${query}`);
    // The UI's scripts load and run slowly on a busy machine (CI runs the suites side by side): a
    // page took over 30 s, and once over 60.
    await page.getByText(run.id).first().waitFor({ timeout: UI_WAIT_MS });
    await page.screenshot({ path: join(mkdtempSync(join(tmpdir(), 'subagent-ui-')), 'list.png') });

    await page.goto(`${temporal.server.uiUrl}/namespaces/default/workflows/${encodeURIComponent(run.id)}`);
    await page.getByText('subagentRunWorkflow').first().waitFor({ timeout: UI_WAIT_MS });
    expect(await page.content()).toContain(run.id);
    await page.close();
    await run.dispose();
  },
  2 * UI_WAIT_MS + 60_000,
);
