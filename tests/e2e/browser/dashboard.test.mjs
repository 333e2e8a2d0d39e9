// The dashboard in headless Chromium against a real `headway server` (with
// authentication, the default) running real jobs. Run with ./run (see harness.mjs for the environment).
// Each step leaves a screenshot in ARTIFACTS_DIR; a failing test leaves
// FAILED-<test>.png as well.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { artifactsDir, launchBrowser, sleep, startServer, trainJob } from './harness.mjs';

const TRIAL_PY = `
import json, sys, time
lr, opt = float(sys.argv[1]), sys.argv[2]
for step in range(1, 11):
    loss = (lr - 0.01) ** 2 * 100 + 1.0 / step + (0.05 if opt == "sgd" else 0.0)
    print("HEADWAY " + json.dumps({"step": step, "total_steps": 10, "metrics": {"loss": loss}}), flush=True)
    time.sleep(0.1)
`;

let server;
let browser;
let page;
// What the browser refused under the dashboard's Content-Security-Policy.
const cspViolations = [];
const SESSION_KEY = 'headway.session';
const storedSession = () => page.evaluate((key) => sessionStorage.getItem(key), SESSION_KEY);

async function shot(name) {
  await page.screenshot({ path: path.join(artifactsDir, `${name}.png`) });
}

// Runs `body`; on failure saves a screenshot named after the test first.
function step(name, body) {
  test(name, { timeout: 45000 }, async () => {
    try {
      await body();
    } catch (error) {
      await page?.screenshot({ path: path.join(artifactsDir, `FAILED-${name.replace(/[^a-z0-9]+/gi, '-')}.png`) }).catch(() => {});
      throw error;
    }
  });
}

const pct = async (name) => Number.parseFloat(await page.locator(`[data-job="${name}"] .pct`).textContent());
const points = async (metric) => Number(await page.locator(`#job-panel [data-metric="${metric}"]`).getAttribute('data-points'));

before(async () => {
  server = await startServer({ gpus: 2, auth: true, extra: ['--quota', 'nlp=1:borrow=1'] });
  const submit = async (spec) => {
    const { status, body } = await server.api('POST', '/api/v1/jobs', spec);
    assert.equal(status, 201, JSON.stringify(body));
  };
  await submit(trainJob('train', { steps: 400, delay: 0.25 }));
  // Holds one of the two GPUs for the queues and nodes views.
  await submit(trainJob('gpu-holder', { steps: 300, delay: 0.3, team: 'nlp', gpus: 1 }));
  const experiment = {
    name: 'tiny',
    objective: { metric: 'loss', direction: 'minimize' },
    algorithm: { name: 'random', seed: 1 },
    parameters: [
      { name: 'lr', type: 'double', min: 0.001, max: 0.1, log: true },
      { name: 'opt', type: 'categorical', values: ['adam', 'sgd'] },
    ],
    max_trials: 2,
    parallel_trials: 2,
    trial_template: {
      team: 'research',
      command: ['/usr/bin/python3', '-u', '-c', TRIAL_PY],
      args: ['${params.lr}', '${params.opt}'],
    },
  };
  const { status, body } = await server.api('POST', '/api/v1/experiments', experiment);
  assert.equal(status, 201, JSON.stringify(body));

  browser = await launchBrowser();
  page = await browser.context.newPage();
  page.on('pageerror', (error) => console.error('page error:', error.message));
  page.on('console', (message) => {
    if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
  });
  // Also the violations that log nothing (e.g. a style attribute set by a library).
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (event) => {
      console.error(`Content-Security-Policy violation: ${event.violatedDirective} ${event.blockedURI}`);
    });
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

step('the jobs list shows progress moving without a reload', async () => {
  // The token arrives in the URL fragment and leaves the address bar; what
  // the tab keeps is a session made from it, not the token itself, and
  // nothing is kept beyond the tab.
  await page.goto(`${server.url}/ui/#token=${server.token}`);
  await page.waitForFunction((key) => sessionStorage.getItem(key), SESSION_KEY);
  assert.ok(!page.url().includes('token='), page.url());
  const session = await storedSession();
  assert.match(session, /^hwu_/);
  assert.notEqual(session, server.token);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  const { body: who } = await server.api('GET', '/api/v1/whoami', undefined, session);
  assert.equal(who.role, 'admin');
  await page.evaluate(() => { window.notReloaded = true; });

  await page.locator('[data-job="train"] .pct').filter({ hasText: /\d+%/ }).waitFor();
  assert.equal(await page.locator('[data-job="train"] .state').textContent(), 'Running');
  const first = await pct('train');
  await shot('01-jobs-list');
  await sleep(3000);
  await page.waitForFunction((before) => {
    const text = document.querySelector('[data-job="train"] .pct')?.textContent;
    return Number.parseFloat(text) > before;
  }, first, { timeout: 10000 });
  const second = await pct('train');
  assert.ok(second > first, `percent ${first} -> ${second}`);
  assert.equal(await page.evaluate(() => window.notReloaded), true, 'the page reloaded');
  await shot('02-jobs-list-later');
});

step('the side panel charts the loss live', async () => {
  await page.locator('[data-job="train"]').click();
  await page.locator('#job-panel').waitFor({ state: 'visible' });
  assert.match(page.url(), /#\/jobs\/train$/);
  const loss = page.locator('#job-panel [data-metric="loss"]');
  await loss.waitFor();
  await page.waitForFunction(() => Number(document.querySelector('#job-panel [data-metric="loss"]')?.dataset.points) > 0);
  const first = await points('loss');
  await shot('03-job-panel');
  await page.waitForFunction((before) => Number(document.querySelector('#job-panel [data-metric="loss"]').dataset.points) > before,
    first, { timeout: 10000 });
  const second = await points('loss');
  assert.ok(second > first, `loss points ${first} -> ${second}`);
  // The other reported metrics get their own charts.
  for (const metric of ['eval', 'learning_rate', 'grad_norm']) {
    assert.ok(await points(metric) > 0, `no ${metric} chart`);
  }
  await page.locator('#job-panel .logs').filter({ hasText: /step \d+ loss/ }).waitFor();
  await shot('04-job-panel-later');
});

step('the Stop button stops the job', async () => {
  const stop = page.locator('#stop-button');
  assert.equal(await stop.isEnabled(), true);
  await stop.click();
  await page.locator('[data-job="train"] .state').filter({ hasText: /^Stopped$/ }).waitFor({ timeout: 15000 });
  const { body } = await server.api('GET', '/api/v1/jobs/train');
  assert.equal(body.state, 'Stopped');
  await page.waitForFunction(() => document.getElementById('stop-button')?.disabled === true);
  await shot('05-stopped');
  await page.locator('#job-panel .close').click();
  await page.locator('#job-panel').waitFor({ state: 'hidden' });
});

step('a wrong token is refused, the right one signs in', async () => {
  await page.evaluate(() => sessionStorage.clear());
  await page.goto(`${server.url}/ui/#/jobs`);
  await page.reload();
  await page.locator('#token-input').waitFor({ state: 'visible' });
  assert.equal(await page.locator('[data-job]').count(), 0);
  await shot('06-login');

  await page.locator('#token-input').fill('hwu_not-a-token');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#login-error').waitFor({ state: 'visible' });
  assert.notEqual((await page.locator('#login-error').textContent()).trim(), '');
  assert.equal(await page.locator('[data-job]').count(), 0);
  await shot('07-login-refused');

  await page.locator('#token-input').fill(server.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('[data-job="train"]').waitFor();
  assert.equal(await page.locator('#token-input').isVisible(), false);
  assert.match(await storedSession(), /^hwu_/);
  assert.notEqual(await storedSession(), server.token);
  assert.equal(await page.evaluate(() => localStorage.length), 0);
  await shot('08-signed-in');

  // Signing out forgets the session and asks for a token again.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#token-input').waitFor({ state: 'visible' });
  assert.equal(await storedSession(), null);
  assert.equal(await page.locator('[data-job]').count(), 0);
  await page.locator('#token-input').fill(server.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('[data-job="train"]').waitFor();
});

step('an expired session brings the sign-in form back', async () => {
  // A token that lives 4 s: its session cannot outlive it.
  const { status, body } = await server.api('POST', '/api/v1/tokens',
    { name: 'brief', team: 'vision', role: 'viewer', ttl: '4s' });
  assert.equal(status, 201, JSON.stringify(body));
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#token-input').fill(body.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('[data-job="train"]').waitFor();
  // The jobs view polls or streams; once the session expires the server says so.
  await page.goto(`${server.url}/ui/#/queues`);
  await page.locator('#token-input').waitFor({ state: 'visible', timeout: 20000 });
  assert.match(await page.locator('#login-error').textContent(), /expired/);
  assert.equal(await storedSession(), null);
  await shot('08b-session-expired');
  await page.locator('#token-input').fill(server.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('tr[data-name="nlp"]').waitFor();
});

step('the queues and nodes views show the GPU pool', async () => {
  await page.goto(`${server.url}/ui/#/queues`);
  const nlp = page.locator('tr[data-name="nlp"]');
  await nlp.waitFor();
  await nlp.filter({ hasText: '1/1' }).waitFor();
  assert.match(await nlp.textContent(), /local/);
  await shot('09-queues');

  await page.goto(`${server.url}/ui/#/nodes`);
  const node = page.locator('table.grid tbody tr[data-name]').first();
  await node.filter({ hasText: 'gpu-holder' }).waitFor();
  assert.match(await node.textContent(), /1\/2/);
  await shot('10-nodes');
  // A job link leads to the job's panel.
  await node.getByRole('link', { name: 'gpu-holder' }).click();
  await page.locator('#job-panel h2').filter({ hasText: 'gpu-holder' }).waitFor();
});

step('an experiment shows its trials as a table and as parallel coordinates', async () => {
  await page.goto(`${server.url}/ui/#/experiments`);
  await page.locator('[data-experiment="tiny"]').waitFor();
  await shot('11-experiments');
  await page.locator('[data-experiment="tiny"] td.name a').click();
  assert.match(page.url(), /#\/experiments\/tiny$/);
  // Both trials end in about two seconds; wait until both have an objective.
  const rows = page.locator('table.trials tbody tr[data-trial]');
  await page.waitForFunction(() => {
    const cells = [...document.querySelectorAll('table.trials tbody tr[data-trial] td:nth-child(6)')];
    return cells.length === 2 && cells.every((td) => td.textContent !== '-');
  }, null, { timeout: 30000 });
  assert.equal(await rows.count(), 2);
  const header = await page.locator('table.trials thead').textContent();
  for (const column of ['Objective', 'lr', 'opt']) assert.ok(header.includes(column), header);
  assert.equal(await page.locator('svg.parcoords path.pc-line').count(), 2);
  assert.equal(await page.locator('svg.parcoords .pc-title').count(), 3);  // lr, opt, the objective
  await shot('12-experiment');
  const { body } = await server.api('GET', '/api/v1/experiments/tiny');
  const shown = await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('td:nth-child(2)').textContent));
  assert.deepEqual(shown.sort(), body.trials.map((t) => t.job).sort());
});

step('the dashboard ran within its Content-Security-Policy', async () => {
  assert.deepEqual(cspViolations, []);
});
