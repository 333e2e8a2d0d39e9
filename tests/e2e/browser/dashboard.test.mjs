// The dashboard in headless Chromium against a real `headway server` (with
// authentication, the default) running real jobs. Run with ./run (see harness.mjs for the environment).
// Each step leaves a screenshot in ARTIFACTS_DIR; a failing test leaves
// FAILED-<test>.png as well.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { artifactsDir, headwayBin, isEnded, launchBrowser, repoRoot, sleep, startServer, trainJob } from './harness.mjs';

const TRIAL_PY = `
import json, sys, time
lr, opt = float(sys.argv[1]), sys.argv[2]
for step in range(1, 11):
    loss = (lr - 0.01) ** 2 * 100 + 1.0 / step + (0.05 if opt == "sgd" else 0.0)
    print("HEADWAY " + json.dumps({"step": step, "total_steps": 10, "metrics": {"loss": loss}}), flush=True)
    time.sleep(0.1)
`;

// Loss falls, turns NaN at steps 25-27, then explodes: the job turns
// Diverging and stays so (the default policy only notifies).
const DIVERGE_PY = `
import json, time
for step in range(1, 41):
    loss = 1.0 / step if step < 25 else ("NaN" if step < 28 else 100.0 * step)
    print("HEADWAY " + json.dumps({"step": step, "total_steps": 100, "metrics": {"loss": loss}}), flush=True)
    time.sleep(0.05)
time.sleep(600)
`;

// Lineage: lineage-prep saves two versions of a dataset; lineage-fit reads
// version 1 and saves a model from it (both through the Python SDK).
const PREP_PY = `
import os, tempfile, headway
d = tempfile.mkdtemp()
for i in (1, 2):
    path = os.path.join(d, "data-%d.bin" % i)
    with open(path, "wb") as f:
        f.write(b"row\\n" * (1000 * i))
    headway.save_artifact(path, "lineage-data", kind="dataset", metrics={"rows": 1000 * i}, labels={"split": "train", "note": "<img src=x onerror=alert(1)>"})
`;
const FIT_PY = `
import os, tempfile, headway
d = tempfile.mkdtemp()
headway.load_artifact("lineage-data:1", os.path.join(d, "data.bin"))
path = os.path.join(d, "model.bin")
with open(path, "wb") as f:
    f.write(b"weights" * 300)
headway.save_artifact(path, "lineage-model", kind="model", step=7, metrics={"eval_loss": 0.25})
`;
const sdkJob = (name, script) => ({
  name, team: 'vision', command: ['/usr/bin/python3', '-u', '-c', script],
  env: { PYTHONPATH: path.join(repoRoot, 'sdk/python') },
});

let server;
let browser;
let page;
// What the browser refused under the dashboard's Content-Security-Policy.
const cspViolations = [];
const SESSION_KEY = 'headway.session';
const storedSession = () => page.evaluate((key) => sessionStorage.getItem(key), SESSION_KEY);

async function shot(name, of = page) {
  await of.screenshot({ path: path.join(artifactsDir, `${name}.png`) });
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

// The jobs list's rows in the order shown: [name, ...].
const listedJobs = () => page.$$eval('.jobs-table [data-job]:not([hidden])',
  (rows) => rows.map((r) => [Number(r.dataset.index), r.dataset.job]).sort((a, b) => a[0] - b[0]).map((r) => r[1]));
// Resolves after the page drew two more frames (views render in the next one).
const settle = () => page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
const chart = (metric) => page.locator(`#job-panel [data-metric="${metric}"]`);
const pct = async (name) => Number.parseFloat(await page.locator(`[data-job="${name}"] .pct`).textContent());
const points = async (metric) => Number(await page.locator(`#job-panel [data-metric="${metric}"]`).getAttribute('data-points'));

before(async () => {
  // A notebook profile whose idle warning comes 2 s into an idle spell, long
  // before its cull: the banner inside Jupyter shows while the test looks.
  fs.mkdirSync(artifactsDir, { recursive: true });
  const profiles = path.join(artifactsDir, 'notebook-profiles.yaml');
  fs.writeFileSync(profiles, 'profiles:\n  - name: default\n    idle_timeout: 10m\n    cull_warning: 598s\n');
  server = await startServer({
    gpus: 2, auth: true,
    extra: ['--quota', 'nlp=1:borrow=1', '--notebook-profiles', profiles, '--notebook-check-interval', '1s'],
  });
  const submit = async (spec) => {
    const { status, body } = await server.api('POST', '/api/v1/jobs', spec);
    assert.equal(status, 201, JSON.stringify(body));
  };
  await submit(trainJob('train', { steps: 400, delay: 0.25 }));
  // Holds one of the two GPUs for the queues and nodes views.
  await submit(trainJob('gpu-holder', { steps: 300, delay: 0.3, team: 'nlp', gpus: 1 }));
  await submit({ name: 'diverge', team: 'vision', command: ['/usr/bin/python3', '-u', '-c', DIVERGE_PY], termination_grace: '2s' });
  // Needs both GPUs while gpu-holder has one: it stays Queued, with a reason.
  await submit({ name: 'waiting', team: 'speech', command: ['/bin/true'], resources: { gpus_per_process: 2 } });
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
  // The list loads only its own code: the other views, the job panel and the
  // chart library come when first opened (the later steps open them).
  const fetched = await page.evaluate(() => performance.getEntriesByType('resource')
    .map((r) => new URL(r.name).pathname));
  assert.ok(fetched.includes('/ui/jobs.js'), fetched.join(' '));
  for (const later of ['/ui/workflows.js', '/ui/experiments.js', '/ui/job_panel.js', '/ui/vendor/uPlot.iife.min.js']) {
    assert.ok(!fetched.includes(later), `${later} was fetched for the jobs list: ${fetched.join(' ')}`);
  }
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

step('smoothing, health marks, sorting and formats compute what they should', async () => {
  // The pure functions behind the views, run in the page as the dashboard loads them.
  const result = await page.evaluate(async () => {
    const charts = await import('/ui/charts.js');
    const { sortJobs } = await import('/ui/jobs.js');
    const format = await import('/ui/format.js');
    const job = (name, created_at, step) => ({ name, created_at, progress: { step } });
    const jobs = [job('a', '2026-01-01', 5), job('b', '2026-01-03', null), job('c', '2026-01-02', 5), job('d', '2026-01-04', 1)];
    const names = (list) => list.map((j) => j.name).join('');
    return {
      constant: charts.smooth([2, 2, 2, 2], 0.9),
      off: charts.smooth([1, 5, 3], 0),
      gaps: charts.smooth([1, null, undefined, 3], 0.5),
      markers: charts.healthMarkers([
        { type: 'HealthChanged', message: 'Unknown -> Progressing (at step 3)' },
        { type: 'HealthChanged', message: 'Progressing -> Stalled: no new step for 5m (median interval 2s) (at step 40)' },
        { type: 'HealthChanged', message: 'Stalled -> Diverging: loss is NaN at step 7' },
        { type: 'StateChanged', message: 'Running -> Stopped (at step 9)' },
        { type: 'HealthChanged', message: 'Stalled -> Progressing (at step 41)' },
      ]).map((m) => `${m.label}@${m.step}`),
      stepAsc: names(sortJobs(jobs, { key: 'step', descending: false })),
      stepDesc: names(sortJobs(jobs, { key: 'step', descending: true })),
      ageAsc: names(sortJobs(jobs, { key: 'age', descending: false })),
      ageDesc: names(sortJobs(jobs, { key: 'age', descending: true })),
      aligned: charts.aligned([{ steps: [1, 3], values: [1, null] }, { steps: [2, 3], values: [5, 6] }]),
      ticksNarrow: charts.logTicks(1.2, 2.1),
      ticksWide: charts.logTicks(0.04, 2.1),
      ticksHuge: charts.logTicks(1e-9, 1e3),
      formats: [format.step(950), format.step(12500), format.step(1250000), format.stepOf({ step: 3, total_steps: 10 }), format.count(10000)],
    };
  });
  assert.deepEqual(result.constant.map((v) => +v.toFixed(9)), [2, 2, 2, 2]);  // debiased: no pull toward 0
  assert.deepEqual(result.off, [1, 5, 3]);
  assert.equal(result.gaps[0], 1);
  assert.equal(result.gaps[1], null);
  assert.equal(result.gaps[2], undefined);
  assert.ok(Math.abs(result.gaps[3] - (0.5 * 0.5 * 1 + 0.5 * 3) / (1 - 0.25)) < 1e-9, String(result.gaps[3]));
  assert.deepEqual(result.markers, ['Stalled@40', 'Progressing@41']);
  // Equal keys keep the default order (newest first); no value: last, both ways.
  assert.equal(result.stepAsc, 'dcab');
  assert.equal(result.stepDesc, 'cadb');
  assert.equal(result.ageAsc, 'dbca');
  assert.equal(result.ageDesc, 'acbd');
  // undefined: no point at that step; null: a non-finite value.
  assert.deepEqual(result.aligned, [[1, 2, 3], [1, undefined, null], [undefined, 5, 6]]);
  // Log axes: round ticks within a decade, 1-2-5 over a few, powers of ten over many.
  assert.deepEqual(result.ticksNarrow, [1.2, 1.4, 1.6, 1.8, 2]);
  assert.deepEqual(result.ticksWide, [0.05, 0.1, 0.2, 0.5, 1, 2]);
  assert.deepEqual(result.ticksHuge, [1e-8, 1e-6, 1e-4, 0.01, 1, 100]);
  assert.deepEqual(result.formats, ['950', '12.5k', '1.25M', '3/10', '10,000']);
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
  // A checkpoint recorded for the job shows in its panel with its step and metrics.
  const digest = `sha256:${'ab'.repeat(32)}`;
  const { status, body } = await server.api('POST', '/api/v1/artifacts', {
    name: 'train-ckpt', kind: 'checkpoint', size: 10, digest, team: 'vision',
    producer: { job: 'train', step: 40 }, metrics: { eval_loss: 0.41 } });
  assert.equal(status, 201, JSON.stringify(body));
  await page.locator('#job-panel .artifacts [data-artifact="train-ckpt:1"]')
    .filter({ hasText: /step 40.*eval_loss 0\.41/ }).waitFor({ timeout: 10000 });
  await shot('04-job-panel-later');
  // Commands run in the job are counted in one line; the job's own events stay listed.
  for (let i = 0; i < 3; ++i) {
    execFileSync(headwayBin, ['--server', server.url, '--token', server.token, 'exec', 'train', '--', 'true']);
  }
  await page.locator('#job-panel .events .exec-summary')
    .filter({ hasText: /3 commands run in the job; the latest: .* ran `true`/ }).waitFor({ timeout: 10000 });
  const types = await page.$$eval('#job-panel .events li:not(.exec-summary) .event-type', (spans) => spans.map((s) => s.textContent));
  assert.ok(types.includes('Submitted'), types.join(','));
  assert.ok(!types.includes('Exec') && !types.includes('ExecEnded'), types.join(','));
});

step('the charts name their axes, follow the cursor, switch to log and smooth', async () => {
  const loss = chart('loss');
  assert.equal(await loss.getAttribute('data-x-label'), 'step');
  assert.equal(await loss.getAttribute('data-y-label'), 'loss');
  // Away from the chart the legend shows the latest values...
  const legend = loss.locator('.chart-legend');
  assert.equal(await legend.getAttribute('data-hover'), 'false');
  assert.match(await legend.textContent(), /latest step \d+.*loss \d/);
  // ...and under the cursor, the values at the cursor's step.
  const plot = loss.locator('.u-over');
  const box = await plot.boundingBox();
  await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
  await page.waitForFunction(() => document.querySelector('#job-panel [data-metric="loss"] .chart-legend').dataset.hover === 'true');
  const hovered = Number(await legend.getAttribute('data-step'));
  const latest = Number(await loss.getAttribute('data-points'));
  assert.ok(hovered >= 1 && hovered < latest, `legend step ${hovered} of ${latest}`);
  assert.match(await legend.textContent(), new RegExp(`^step ${hovered}(?!\\d).*loss \\d`));
  // The cursor is shared: the other charts' legends follow it.
  assert.equal(await chart('grad_norm').locator('.chart-legend').getAttribute('data-hover'), 'true');
  await shot('04b-chart-cursor');
  await page.mouse.move(5, 5);

  // Log scale for y, per chart.
  assert.equal(await loss.getAttribute('data-scale'), 'linear');
  await loss.getByRole('button', { name: 'log y' }).click();
  await page.waitForFunction(() => document.querySelector('#job-panel [data-metric="loss"]').dataset.scale === 'log');
  assert.equal(await loss.getByRole('button', { name: 'log y' }).getAttribute('aria-pressed'), 'true');
  assert.equal(await chart('grad_norm').getAttribute('data-scale'), 'linear');

  // EMA smoothing, for every chart; the legend then gives both values.
  await page.locator('#job-panel input.smoothing').fill('0.8');
  await page.waitForFunction(() => [...document.querySelectorAll('#job-panel .chart')].every((c) => c.dataset.smoothing === '0.8'));
  assert.match(await legend.textContent(), /loss \d\S* \(raw \d/);
  assert.equal(await page.locator('#job-panel .smoothing-value').textContent(), '0.80');
  await shot('04c-chart-log-smoothed');
  await loss.getByRole('button', { name: 'log y' }).click();
  await page.locator('#job-panel input.smoothing').fill('0');
  await page.waitForFunction(() => document.querySelector('#job-panel [data-metric="loss"]').dataset.scale === 'linear'
    && document.querySelector('#job-panel [data-metric="loss"]').dataset.smoothing === '0');
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

step('a diverging job: NaN points and the health change marked, its bar red', async () => {
  await page.goto(`${server.url}/ui/#/jobs/diverge`);
  const loss = chart('loss');
  await loss.waitFor();
  await page.waitForFunction(() => Number(document.querySelector('#job-panel [data-metric="loss"]')?.dataset.nonFinite) === 3,
    null, { timeout: 15000 });
  await page.waitForFunction(() => /Diverging@\d+/.test(document.querySelector('#job-panel [data-metric="loss"]')?.dataset.markers || ''),
    null, { timeout: 15000 });
  const markers = await loss.getAttribute('data-markers');
  const at = Number(/Diverging@(\d+)/.exec(markers)[1]);
  assert.ok(at >= 25 && at <= 40, markers);
  assert.doesNotMatch(markers, /Progressing@/);  // a job's first Unknown -> Progressing is not marked
  const { body: events } = await server.api('GET', '/api/v1/jobs/diverge/events');
  const change = events.events.find((e) => e.type === 'HealthChanged' && e.message.includes('-> Diverging'));
  assert.match(change.message, new RegExp(`\\(at step ${at}\\)$`));
  await page.locator('#job-panel .badge.health-diverging').waitFor();
  const bar = page.locator('#job-panel .progress-line .bar-fill');
  assert.match(await bar.getAttribute('class'), /tone-diverging/);
  assert.equal(await bar.evaluate((e) => getComputedStyle(e).backgroundColor), 'rgb(220, 38, 38)');
  await shot('05b-diverging-job');
  // In the list too.
  const rowBar = page.locator('[data-job="diverge"] .bar-fill');
  assert.match(await rowBar.getAttribute('class'), /tone-diverging/);
  assert.notEqual(await page.locator('[data-job="gpu-holder"] .bar-fill').evaluate((e) => getComputedStyle(e).backgroundColor),
    'rgb(220, 38, 38)');
  await page.locator('#job-panel .close').click();
  await page.locator('#job-panel').waitFor({ state: 'hidden' });
});

step('the jobs table sorts by a clicked column and says why queued jobs wait', async () => {
  await page.goto(`${server.url}/ui/#/jobs`);
  await page.locator('[data-job="waiting"]').waitFor();
  assert.equal(await page.locator('[data-job="waiting"] .state').textContent(), 'Queued');
  await page.locator('[data-job="waiting"] .cell.pending').filter({ hasText: /\w/ }).waitFor();
  const { body: waiting } = await server.api('GET', '/api/v1/jobs/waiting');
  assert.ok(waiting.pending_reason, JSON.stringify(waiting));
  assert.equal(await page.locator('[data-job="waiting"] .cell.pending').textContent(), waiting.pending_reason);
  assert.equal(await page.locator('[data-job="train"] .cell.pending').textContent(), '');

  const header = (name) => page.locator(`.jobs-table .head [data-sort="${name}"]`);
  assert.equal(await header('age').getAttribute('aria-sort'), 'ascending');  // newest first
  const all = await listedJobs();
  const names = [...all].sort();
  await header('name').click();
  assert.equal(await header('name').getAttribute('aria-sort'), 'ascending');
  assert.equal(await header('age').getAttribute('aria-sort'), 'none');
  await page.waitForFunction((first) => document.querySelector('.jobs-table [data-index="0"]:not([hidden])')?.dataset.job === first, names[0]);
  assert.deepEqual(await listedJobs(), names);
  await shot('05c-sorted-by-name');
  await header('name').click();
  assert.equal(await header('name').getAttribute('aria-sort'), 'descending');
  await page.waitForFunction((first) => document.querySelector('.jobs-table [data-index="0"]:not([hidden])')?.dataset.job === first, names[names.length - 1]);
  assert.deepEqual(await listedJobs(), [...names].reverse());
  // By step: jobs without a step (the queued one) last, both ways.
  await header('step').click();
  await settle();
  let order = await listedJobs();
  assert.equal(order[order.length - 1], 'waiting', order.join(','));
  await header('step').click();
  await settle();
  order = await listedJobs();
  assert.equal(order[order.length - 1], 'waiting', order.join(','));
  // Keyboard: Enter on a focused header sorts too.
  await header('age').focus();
  await page.keyboard.press('Enter');
  assert.equal(await header('age').getAttribute('aria-sort'), 'ascending');
  await page.waitForFunction((first) => document.querySelector('.jobs-table [data-index="0"]:not([hidden])')?.dataset.job === first, all[0]);
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
  // The trials' learning curves on one chart, one line per trial.
  const curves = page.locator('[data-metric="trials"]');
  await page.waitForFunction(() => document.querySelectorAll('[data-metric="trials"] .legend-item').length === 2
    && Number(document.querySelector('[data-metric="trials"]').dataset.points) === 10, null, { timeout: 15000 });
  assert.equal(await curves.getAttribute('data-y-label'), 'loss');
  assert.equal(await curves.getAttribute('data-scale'), 'linear');
  assert.match(await curves.locator('.chart-legend').textContent(), /#0 \d.*#1 \d/);
  await shot('12-experiment');
  // A log scale for the objective: the curves and the objective axis.
  await page.getByLabel('Log scale for the objective').check();
  await page.waitForFunction(() => document.querySelector('[data-metric="trials"]').dataset.scale === 'log'
    && document.querySelector('svg.parcoords').dataset.objectiveScale === 'log');
  assert.match(await page.locator('svg.parcoords .pc-title').last().textContent(), /\(min, log\)/);
  await shot('12b-experiment-log');
  await page.getByLabel('Log scale for the objective').uncheck();
  await page.waitForFunction(() => document.querySelector('[data-metric="trials"]').dataset.scale === 'linear');
  const { body } = await server.api('GET', '/api/v1/experiments/tiny');
  const shown = await rows.evaluateAll((trs) => trs.map((tr) => tr.querySelector('td:nth-child(2)').textContent));
  assert.deepEqual(shown.sort(), body.trials.map((t) => t.job).sort());
});

// Resolves with the job once it ended; fails the test unless it succeeded.
async function jobSucceeds(name, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await server.api('GET', `/api/v1/jobs/${name}`);
    if (isEnded(body.state)) {
      assert.equal(body.state, 'Succeeded', `${name}: ${JSON.stringify(body)}`);
      return body;
    }
    assert.ok(Date.now() < deadline, `${name} still ${body.state}`);
    await sleep(200);
  }
}

step('size, digest, command and ref formats of the artifact view', async () => {
  const result = await page.evaluate(async () => {
    const { bytes } = await import('/ui/format.js');
    const a = await import('/ui/artifacts.js');
    return {
      sizes: [0, 1023, 1024, 1536, 10 * 1024 * 1024 + 1, 2 * 1024 ** 3, 5 * 1024 ** 4].map(bytes),
      digest: a.shortDigest(`sha256:${'0123456789abcdef'.repeat(4)}`),
      shortOne: a.shortDigest('sha256:abc'),
      shell: a.shellLine(['python3', '-c', "print('hi there')", '--lr=0.1']),
      refs: [a.parseRef('data:3'), a.parseRef('data'), a.parseRef('data:latest')],
      href: a.artifactHref('a.b_c-d', 12),
    };
  });
  assert.deepEqual(result.sizes, ['0 B', '1023 B', '1.00 KiB', '1.50 KiB', '10.0 MiB', '2.00 GiB', '5.00 TiB']);
  assert.equal(result.digest, 'sha256:0123456789ab\u2026');
  assert.equal(result.shortOne, 'sha256:abc');
  assert.equal(result.shell, `python3 -c 'print('\\''hi there'\\'')' --lr=0.1`);
  assert.deepEqual(result.refs, [{ name: 'data', version: '3' }, { name: 'data', version: 'latest' }, { name: 'data', version: 'latest' }]);
  assert.equal(result.href, '#/artifacts/a.b_c-d:12');
});

step('an artifact\u2019s lineage: made by, made from, used by, its versions, each a link', async () => {
  let { status, body } = await server.api('POST', '/api/v1/jobs', sdkJob('lineage-prep', PREP_PY));
  assert.equal(status, 201, JSON.stringify(body));
  await jobSucceeds('lineage-prep');
  ({ status, body } = await server.api('POST', '/api/v1/jobs', sdkJob('lineage-fit', FIT_PY)));
  assert.equal(status, 201, JSON.stringify(body));
  await jobSucceeds('lineage-fit');
  const { body: model } = await server.api('GET', '/api/v1/artifacts/lineage-model/versions/1');
  assert.equal(model.state, 'Ready', JSON.stringify(model));

  // From the reading job's panel: what it made and what it read are links.
  await page.goto(`${server.url}/ui/#/jobs/lineage-fit`);
  const panelArtifacts = page.locator('#job-panel .artifacts');
  await panelArtifacts.locator('[data-artifact="lineage-data:1"]').filter({ hasText: /^read/ }).waitFor();
  await panelArtifacts.locator('[data-artifact="lineage-model:1"] a').click();

  const view = page.locator('.artifact-view');
  const title = view.locator('.artifact-title');
  await title.filter({ hasText: /^lineage-model:1$/ }).waitFor();
  assert.match(page.url(), /#\/artifacts\/lineage-model:1$/);
  assert.equal(await page.locator('#job-panel').isVisible(), false);
  assert.equal(await page.locator('#nav a.active').textContent(), 'Artifacts');
  const facts = await view.locator('.facts .details').textContent();
  assert.match(facts, /Kindmodel/);
  assert.match(facts, /Size2\.05 KiB/);  // 2100 bytes
  assert.match(facts, /eval_loss 0\.25/);
  const digest = view.locator('.digest-value');
  assert.equal(await digest.getAttribute('title'), model.digest);
  assert.equal(await digest.textContent(), `${model.digest.slice(0, 'sha256:'.length + 12)}\u2026`);
  // Made by the job that read lineage-data:1, at step 7, with its command.
  const madeBy = view.locator('.made-by');
  assert.equal(await madeBy.locator('.job-link').textContent(), 'lineage-fit');
  assert.match(await madeBy.textContent(), /Succeeded.*step 7/);
  assert.match(await view.locator('.command').textContent(), /^\/usr\/bin\/python3 -u -c '.*load_artifact\("lineage-data:1"/s);
  assert.deepEqual(await view.locator('.made-from tr').evaluateAll((rows) => rows.map((r) => r.dataset.artifact)), ['lineage-data:1']);
  assert.match(await view.locator('.used-by').textContent(), /No job has read this version/);
  await shot('13-artifact-lineage-model');

  // Made from: the dataset, made by lineage-prep and used by lineage-fit.
  await view.locator('.made-from [data-artifact="lineage-data:1"] a').click();
  await title.filter({ hasText: /^lineage-data:1$/ }).waitFor();
  assert.match(page.url(), /#\/artifacts\/lineage-data:1$/);
  assert.equal(await view.locator('.made-by .job-link').textContent(), 'lineage-prep');
  assert.deepEqual(await view.locator('.used-by tr').evaluateAll((rows) => rows.map((r) => r.dataset.job)), ['lineage-fit']);
  const { body: data } = await server.api('GET', '/api/v1/artifacts/lineage-data/versions/1');
  assert.equal(data.lineage.used_by[0].job, 'lineage-fit');
  assert.match(await view.locator('.used-by').textContent(), new RegExp(`^lineage-fitattempt ${data.lineage.used_by[0].attempt}read `));
  assert.match(await view.locator('.made-from').textContent(), /read no artifacts/);
  assert.match(await view.locator('.facts').textContent(), /rows 1000.*note=<img src=x onerror=alert\(1\)>.*split=train/s);
  assert.equal(await view.locator('img').count(), 0);  // labels are text, never markup
  // The digest's copy button puts all of it on the clipboard.
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  await view.locator('.digest button.copy').click();
  await view.locator('.copy-note').filter({ hasText: 'copied' }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), await view.locator('.digest-value').getAttribute('title'));
  // Its versions, newest first, this one marked.
  assert.deepEqual(await view.locator('.versions .version').allTextContents(), ['v2', 'v1']);
  assert.equal(await view.locator('.versions [aria-current="page"]').textContent(), 'v1');
  await shot('14-artifact-lineage-data');

  // Step to version 2 (nobody read it) and back through the history.
  await view.locator('.versions a.version[data-version="2"]').click();
  await title.filter({ hasText: /^lineage-data:2$/ }).waitFor();
  assert.match(await view.locator('.facts').textContent(), /rows 2000/);
  assert.match(await view.locator('.used-by').textContent(), /No job has read this version/);
  assert.equal(await view.locator('.versions [aria-current="page"]').textContent(), 'v2');
  await page.goBack();
  await title.filter({ hasText: /^lineage-data:1$/ }).waitFor();

  // Used by: the reader's panel, as the jobs list opens it.
  await view.locator('.used-by [data-job="lineage-fit"] a').click();
  await page.locator('#job-panel h2').filter({ hasText: /^lineage-fit$/ }).waitFor();
  assert.match(page.url(), /#\/jobs\/lineage-fit$/);
  await page.goBack();
  // Made by: the producer's panel.
  await title.filter({ hasText: /^lineage-data:1$/ }).waitFor();
  await view.locator('.made-by .job-link').click();
  await page.locator('#job-panel h2').filter({ hasText: /^lineage-prep$/ }).waitFor();
  assert.match(page.url(), /#\/jobs\/lineage-prep$/);
  await page.locator('#job-panel .artifacts [data-artifact="lineage-data:2"]').filter({ hasText: /made.*rows 2000/ }).waitFor();

  // The list of versions leads to them too.
  await page.goto(`${server.url}/ui/#/artifacts`);
  await page.locator('.artifact-list [data-artifact="lineage-model:1"]').waitFor();
  await shot('14b-artifacts-list');
  await page.locator('.artifact-list [data-artifact="lineage-model:1"] a.artifact-link').click();
  await title.filter({ hasText: /^lineage-model:1$/ }).waitFor();

  // A version that does not exist: said so in the view.
  await page.goto(`${server.url}/ui/#/artifacts/lineage-data:99`);
  await view.locator('.artifact-error').filter({ hasText: /not found/ }).waitFor();
  await shot('15-artifact-not-found');
});

step('another team\u2019s artifact: the view says it may not be seen', async () => {
  const { status, body } = await server.api('POST', '/api/v1/tokens', { name: 'speech-viewer', team: 'speech', role: 'viewer' });
  assert.equal(status, 201, JSON.stringify(body));
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#token-input').fill(body.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#token-input').waitFor({ state: 'hidden' });
  await page.goto(`${server.url}/ui/#/artifacts/lineage-data:1`);
  const error = page.locator('.artifact-view .artifact-error');
  await error.filter({ hasText: /may not see artifact lineage-data:1.*another team/ }).waitFor();
  assert.equal(await page.locator('.artifact-view .made-by').count(), 0);
  await shot('16-artifact-forbidden');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.locator('#token-input').fill(server.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#token-input').waitFor({ state: 'hidden' });
});

// An Argo Workflow of `templates`, entered at "main", of team `team`.
const argoWorkflow = (name, templates, { team = 'vision', spec = {} } = {}) => ({
  workflow: {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Workflow',
    metadata: { name, labels: { 'headway.dev/team': team } },
    spec: { entrypoint: 'main', templates, ...spec },
  },
});
// Opens #ROUTE signed in as the admin (whatever the tests before left).
async function signedIn(route) {
  await page.goto('about:blank');
  await page.goto(`${server.url}/ui/#${route}?token=${server.token}`);
  await page.locator('.view').first().waitFor();
}
// Where a workflow node (by display name) is on screen, or null out of view.
const locateNode = (name) => page.locator('.dag-canvas').evaluate((canvas, key) => canvas.locateNode(key), name);
// The node's details beside the graph, after a click on it.
async function clickNode(name) {
  const at = await locateNode(name);
  assert.ok(at, `node ${name} is not in view`);
  await page.mouse.click(at.x, at.y);
  await page.locator('.wf-node h3').filter({ hasText: new RegExp(`^${name.replace(/[()[\]]/g, '\\$&')}$`) }).waitFor();
}

step('the workflow graph layout: dependencies, step groups, wide fan-outs in rows', async () => {
  await signedIn('/workflows');
  const result = await page.evaluate(async () => {
    const { layoutWorkflow, layoutKey } = await import('/ui/dag.js');
    const node = (id, type, extra = {}) => ({ id, name: id, displayName: id.split('.').pop(), type, phase: 'Succeeded', ...extra });
    const layers = (layout, nodes) => Object.fromEntries(Object.keys(nodes).map((id) => [nodes[id].displayName, layout.pos.get(id).layer]));
    const tasks = [
      { name: 'A', template: 't' }, { name: 'B', template: 't', dependencies: ['A'] },
      { name: 'C', template: 't', depends: 'A.Succeeded' }, { name: 'D', template: 't', depends: 'B && (C || C.Skipped)' },
    ];
    const templates = [{ name: 'main', dag: { tasks } }, { name: 't', container: {} }];
    const pod = (id, extra) => node(id, 'Pod', { boundaryID: 'w', ...extra });
    // As Argo links a DAG: root tasks under the DAG node, the rest under what they depend on.
    const argo = {
      w: node('w', 'DAG', { templateName: 'main', children: ['w.A'] }),
      'w.A': pod('w.A', { children: ['w.B', 'w.C'] }), 'w.B': pod('w.B', { children: ['w.D'] }),
      'w.C': pod('w.C', { children: ['w.D'] }), 'w.D': pod('w.D'),
    };
    // Every task under the DAG node: the dependencies come from the template.
    const flat = {
      w: node('w', 'DAG', { templateName: 'main', children: ['w.A', 'w.B', 'w.C', 'w.D'] }),
      'w.A': pod('w.A'), 'w.B': pod('w.B'), 'w.C': pod('w.C'), 'w.D': pod('w.D'),
    };
    // Steps: the groups one after another, whichever node lists them; after
    // a step that is a DAG, the next group follows where the DAG ends.
    const steps = {
      s: node('s', 'Steps', { children: ['s0', 's1', 's2'] }),
      s0: node('s0', 'StepGroup', { displayName: '[0]', boundaryID: 's', children: ['s.a', 's.b'] }),
      's.a': node('s.a', 'Pod', { boundaryID: 's' }), 's.b': node('s.b', 'Pod', { boundaryID: 's' }),
      s1: node('s1', 'StepGroup', { displayName: '[1]', boundaryID: 's', children: ['s.c'] }),
      's.c': node('s.c', 'DAG', { boundaryID: 's', templateName: 'inner', children: ['s.c.x', 's.c.y'] }),
      's.c.x': node('s.c.x', 'Pod', { boundaryID: 's.c' }), 's.c.y': node('s.c.y', 'Pod', { boundaryID: 's.c' }),
      s2: node('s2', 'StepGroup', { displayName: '[2]', boundaryID: 's', children: ['s.d'] }),
      's.d': node('s.d', 'Pod', { boundaryID: 's' }),
    };
    const inner = [{ name: 'inner', dag: { tasks: [{ name: 'x', template: 't' }, { name: 'y', template: 't', depends: 'x' }] } }];
    // A fan-out of 5,000 under one step group.
    const wide = { f: node('f', 'Steps', { children: ['g'] }), g: node('g', 'StepGroup', { displayName: '[0]', children: [] }) };
    for (let i = 0; i < 5000; i++) {
      const id = `f-${i}`;
      wide[id] = node(id, 'Suspend', { displayName: `wait(${i}:${i})`, phase: 'Running' });
      wide.g.children.push(id);
    }
    const big = layoutWorkflow(wide, []);
    const key = layoutKey(wide);
    const phaseOnly = layoutKey({ ...wide, 'f-7': { ...wide['f-7'], phase: 'Failed' } });
    const grown = layoutKey({ ...wide, extra: node('extra', 'Pod') });
    const first = big.pos.get('f-0');
    const second = big.pos.get('f-1');
    const last = big.pos.get('f-4999');
    return {
      argo: layers(layoutWorkflow(argo, templates), argo),
      flat: layers(layoutWorkflow(flat, templates), flat),
      flatOrder: ['w.B', 'w.C'].map((id) => layoutWorkflow(flat, templates).pos.get(id).x),
      steps: layers(layoutWorkflow(steps, inner), steps),
      ms: big.ms, width: big.width, height: big.height, rows: big.layers[2].rows,
      order: first.y === second.y && first.x < second.x && last.y > first.y,
      sameKey: key === phaseOnly, newKey: key !== grown,
    };
  });
  console.log(`layout of 5,002 nodes: ${result.ms.toFixed(1)} ms`);
  assert.deepEqual(result.argo, { w: 0, A: 1, B: 2, C: 2, D: 3 });
  assert.deepEqual(result.flat, result.argo);
  assert.ok(result.flatOrder[0] < result.flatOrder[1]);
  assert.deepEqual(result.steps, { s: 0, '[0]': 1, a: 2, b: 2, '[1]': 3, c: 4, x: 5, y: 6, '[2]': 7, d: 8 });
  // Rows of at most 50: about 9,000 px wide, not a million.
  assert.equal(result.rows, 100);
  assert.ok(result.width < 10000 && result.height < 6000, JSON.stringify(result));
  assert.ok(result.order);
  assert.ok(result.ms < 1000, `${result.ms} ms`);
  // A phase change keeps the layout; a new node makes a new one.
  assert.ok(result.sameKey && result.newKey);
});

step('a workflow: listed, its graph reaches Succeeded, a Pod node opens its job', async () => {
  const work = { name: 'work', container: { image: 'alpine', command: ['sh', '-c', 'sleep 1'] } };
  const tasks = [
    { name: 'A', template: 'work' },
    { name: 'B', template: 'work', depends: 'A' },
    { name: 'C', template: 'work', depends: 'A.Succeeded' },
    { name: 'D', template: 'work', depends: 'B && (C.Succeeded || C.Skipped)' },
  ];
  const { status, body } = await server.api('POST', '/api/v1/workflows/default',
    argoWorkflow('diamond', [{ name: 'main', dag: { tasks } }, work]));
  assert.equal(status, 200, JSON.stringify(body));

  await signedIn('/jobs');
  await page.locator('#nav a[data-view="workflows"]').click();
  const row = page.locator('table.workflows [data-workflow="diamond"]');
  await row.waitFor();
  assert.match(await row.textContent(), /^diamondvision(Running|Pending|Succeeded)/);
  await shot('17-workflows');
  await row.locator('a').click();
  assert.match(page.url(), /#\/workflows\/default\/diamond$/);
  await page.locator('.wf-title').filter({ hasText: /^diamond$/ }).waitFor();
  await page.locator('.wf-phase').filter({ hasText: 'Succeeded' }).waitFor({ timeout: 30000 });
  await page.locator('.dag-canvas[data-nodes="5"]').waitFor();
  assert.match(await page.locator('.wf-header').textContent(), /4\/4/);
  await settle();
  await shot('18-workflow-dag');

  // Layered by dependency: A above B and C, side by side, above D.
  const at = {};
  for (const name of ['A', 'B', 'C', 'D']) at[name] = await locateNode(name);
  assert.ok(at.A.y < at.B.y && at.B.y === at.C.y && at.C.y < at.D.y, JSON.stringify(at));
  assert.ok(at.B.x !== at.C.x && at.A.x === at.D.x, JSON.stringify(at));

  // Each task node: Succeeded, in the box beside the graph; a Pod node
  // opens the panel of the job that ran it.
  const { body: wf } = await server.api('GET', '/api/v1/workflows/default/diamond');
  const byName = Object.fromEntries(Object.values(wf.status.nodes).map((n) => [n.displayName, n]));
  for (const name of ['A', 'B', 'C', 'D']) {
    if (await page.locator('#job-panel').isVisible()) await page.locator('#job-panel .panel-top .close').click();
    await clickNode(name);
    const box = page.locator('.wf-node');
    assert.equal(await box.getAttribute('data-node'), byName[name].id);
    assert.equal(await box.locator('.status-line .badge').textContent(), 'Succeeded');
    assert.match(await box.locator('.details').textContent(), /TypePodTemplatework/);
    const job = byName[name].headway.job;
    assert.ok(job, JSON.stringify(byName[name]));
    await page.locator('#job-panel h2').filter({ hasText: new RegExp(`^${job}$`) }).waitFor();
    await page.locator('#job-panel .state .badge').filter({ hasText: 'Succeeded' }).waitFor();
  }
  await shot('19-workflow-node-job');
  await page.locator('#job-panel .panel-top .close').click();

  // An error of the server is shown as it says it: deleted behind our back.
  assert.equal((await server.api('DELETE', '/api/v1/workflows/default/diamond')).status, 200);
  await page.locator('[data-action="delete"]').click();
  await page.locator('[data-action="delete"]').filter({ hasText: /sure/ }).click();
  await page.locator('.wf-error').filter({ hasText: /Delete failed: workflow 'diamond' not found/ }).waitFor();
  // The next refresh finds it gone too, and says so beside the action's
  // error instead of over it.
  await page.locator('.wf-refresh-error').filter({ hasText: /No workflow named diamond/ }).waitFor();
  assert.match(await page.locator('.wf-error').textContent(), /Delete failed: workflow 'diamond' not found/);
  assert.ok(await page.locator('.wf-error').isVisible());
});

step('a workflow of 5,000 nodes: drawn in seconds, pans and zooms to far nodes, terminated', async () => {
  // One step over a sequence of 5,000 suspend nodes: all created at once, no process runs.
  const { status, body } = await server.api('POST', '/api/v1/workflows/default', argoWorkflow('fanout', [
    { name: 'main', steps: [[{ name: 'wait', template: 'hold', withSequence: { count: '5000' } }]] },
    { name: 'hold', suspend: {} },
  ], { team: 'nlp' }));
  assert.equal(status, 200, JSON.stringify(body));
  let count = 0;
  for (let i = 0; i < 50 && count < 5000; i++) {
    const { body: wf } = await server.api('GET', '/api/v1/workflows/default/fanout');
    count = Object.keys(wf.status?.nodes || {}).length;
    if (count < 5000) await sleep(200);
  }
  assert.ok(count >= 5000, `${count} nodes`);

  await signedIn('/workflows');
  const row = page.locator('table.workflows [data-workflow="fanout"]');
  await row.waitFor();
  await page.locator('.workflows-view .filter-team').selectOption('nlp');
  assert.equal(await page.locator('.workflows-view .count').textContent(), '1 workflow');
  assert.match(await row.textContent(), /^fanoutnlpRunning0\/0/);
  const t0 = await page.evaluate(() => performance.now());
  await row.locator('a').click();
  const canvas = page.locator(`.dag-canvas[data-nodes="${count}"][data-draw-ms]`);
  await canvas.waitFor({ timeout: 15000 });
  const t1 = await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => resolve(performance.now()))));
  const layoutMs = Number(await canvas.getAttribute('data-layout-ms'));
  const drawMs = Number(await canvas.getAttribute('data-draw-ms'));
  console.log(`${count} nodes: shown ${Math.round(t1 - t0)} ms after the click (fetch, layout ${layoutMs} ms, a frame ${drawMs} ms)`);
  assert.ok(t1 - t0 < 10000, `${t1 - t0} ms`);
  await shot('20-workflow-5000');

  // Far from the root: out of view at first.
  const far = 'wait(4999:4999)';
  assert.equal(await locateNode(far), null);
  const scale = async () => Number(await canvas.getAttribute('data-scale'));
  // The wheel zooms out at the cursor, the Fit button shows everything.
  const box = await canvas.boundingBox();
  const start = await scale();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, 400);
  await page.waitForFunction((s) => Number(document.querySelector('.dag-canvas').dataset.scale) < s, start);
  await page.locator('.dag-fit').click();
  await page.waitForFunction(() => Number(document.querySelector('.dag-canvas').dataset.scale) < 0.3);
  await settle();
  await shot('21-workflow-5000-fit');
  const before = await locateNode(far);
  assert.ok(before, 'the far node is in view once fitted');
  // A drag pans: the node moves with the pointer.
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width / 2 - 60, box.y + box.height / 2 - 40, { steps: 4 });
  await page.mouse.up();
  await settle();
  const after = await locateNode(far);
  assert.ok(Math.abs(after.x - (before.x - 60)) < 1 && Math.abs(after.y - (before.y - 40)) < 1, JSON.stringify([before, after]));
  // A click on it, tiny as it is, selects it.
  await clickNode(far);
  assert.equal(await page.locator('.wf-node .status-line .badge').textContent(), 'Running');
  assert.match(await page.locator('.wf-node .details').textContent(), /TypeSuspend/);
  // Zoom back in to read it.
  for (let i = 0; i < 12; i++) await page.locator('.dag-toolbar button[title^="Zoom in"]').click();
  await page.waitForFunction(() => Number(document.querySelector('.dag-canvas').dataset.scale) > 1);
  await shot('22-workflow-5000-node');

  // Suspend: Resume takes its place (not pressed: as in Argo, it would
  // resume the suspend nodes too, and the workflow would succeed).
  await page.locator('[data-action="suspend"]').click();
  await page.locator('.wf-phase').filter({ hasText: 'Suspended' }).waitFor();
  await page.locator('[data-action="resume"]').waitFor();
  assert.equal(await page.locator('[data-action="suspend"]').isVisible(), false);

  // Terminate: the workflow fails, with the server's message.
  await page.locator('[data-action="terminate"]').click();
  await page.locator('.wf-phase').filter({ hasText: 'Failed' }).waitFor({ timeout: 15000 });
  await page.locator('.wf-message').filter({ hasText: /Terminate/ }).waitFor();
  assert.equal(await page.locator('[data-action="terminate"]').isVisible(), false);
  const { body: ended } = await server.api('GET', '/api/v1/workflows/default/fanout');
  assert.equal(ended.status.phase, 'Failed');
  await shot('23-workflow-terminated');
});

step('a notebook: listed with its GPUs and idle time, Open signs a new tab in to Jupyter', async () => {
  const { status, body } = await server.api('POST', '/api/v1/notebooks', { name: 'lab', team: 'vision' });
  assert.equal(status, 201, JSON.stringify(body));
  await page.goto(`${server.url}/ui/#/notebooks`);
  const row = page.locator('tr[data-name="lab"]');
  await row.locator('td.status').filter({ hasText: 'Ready' }).waitFor({ timeout: 40000 });
  assert.equal(await row.locator('td.num').textContent(), '0');
  assert.match(await row.locator('td.idle').textContent(), /^\d+s/);
  await shot('24-notebooks');
  const [tab] = await Promise.all([
    browser.context.waitForEvent('page'),
    row.locator('button.open-notebook').click(),
  ]);
  // The one-time link sets the notebook's cookie and lands on Jupyter's file list.
  await tab.waitForURL(/\/notebooks\/lab\/tree/, { timeout: 20000 });
  await tab.waitForLoadState('domcontentloaded');
  assert.match(await tab.title(), /Home Page|Jupyter/);
  const kernels = await tab.evaluate(async () => (await fetch('/notebooks/lab/api/kernels')).status);
  assert.equal(kernels, 200, 'the cookie authorises the notebook\'s own API');
  // On an origin of its own (lab.localhost): its pages, and a member's
  // custom.js in them, share nothing with the dashboard's origin.
  const port = new URL(server.url).port;
  assert.equal(new URL(tab.url()).origin, `http://lab.localhost:${port}`);
  const api = await tab.evaluate(async () => (await fetch('/api/v1/jobs')).status);
  assert.equal(api, 404, 'and nothing else of the server');
  // Opened with noopener: no handle on the dashboard, no copy of its
  // sessionStorage (where the dashboard keeps its session).
  assert.deepEqual(await tab.evaluate(() => [window.opener, sessionStorage.length]), [null, 0]);
  // A page of the notebook cannot read the dashboard (another origin), and
  // its requests to the dashboard's origin carry no credentials it has.
  const cross = await tab.evaluate(async (dashboard) => {
    try {
      const r = await fetch(`${dashboard}/api/v1/jobs`, { credentials: 'include' });
      return `read ${r.status}`;
    } catch (e) {
      return 'refused';
    }
  }, server.url);
  assert.equal(cross, 'refused', 'the dashboard\'s origin does not answer the notebook\'s pages');
  // Idle: Jupyter's page shows when it will be stopped; "Keep it running" ends the spell.
  const warned = () => tab.evaluate(async () => {
    const r = await fetch('/notebooks/lab/headway-status');
    return r.ok && (await r.json()).warned;
  });
  for (let i = 0; i < 30 && !(await warned()); ++i) await sleep(500);
  await tab.reload();
  const banner = tab.locator('#headway-idle-banner');
  await banner.waitFor({ timeout: 10000 });
  assert.match(await banner.textContent(), /has been idle since .* and will be stopped at .*Your files are kept/);
  await shot('25-notebook-idle-banner', tab);
  await tab.locator('#headway-keep').click();
  await banner.waitFor({ state: 'detached', timeout: 10000 });
  await tab.close();
  // Stop: the row says so and offers Start.
  await row.locator('button.stop-notebook').click();
  await row.locator('td.status').filter({ hasText: 'Stopped' }).waitFor({ timeout: 10000 });
  await row.locator('button.start-notebook').waitFor();
});

step('the dashboard ran within its Content-Security-Policy', async () => {
  assert.deepEqual(cspViolations, []);
});
