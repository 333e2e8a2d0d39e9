// How the dashboard copes with 10,000 jobs. Prints figures; asserts nothing.
//
//   cd tests/e2e/browser && npm ci && node bench_10k.mjs [--jobs N]
//   node bench_10k.mjs --url http://127.0.0.1:PORT --token TOKEN   # measure a server already filled
//
// A server with --gpus 1 gets one long job that holds the GPU, then N jobs
// that each need a GPU (submitted concurrently), so they all stay Queued. Then
// the dashboard opens in headless Chromium and we measure, in the page:
//   - time from navigation to the first render of the full list,
//   - time to apply a filter (search text, state, team), until the rows are laid out,
//   - time to sort by a clicked column header (name, step, team) and back,
//   - scrolling: the interval between frames and the main-thread work per frame,
//   - the JS heap after a forced GC, and how many DOM nodes the page holds.
// Environment as for the tests (harness.mjs).

import { launchBrowser, sleep, startServer, trainJob } from './harness.mjs';

const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const JOBS = Number(arg('--jobs') || 10000);
const CONCURRENCY = 32;
const TEAMS = ['vision', 'nlp', 'speech', 'rl', 'research'];

const ms = (v) => `${v.toFixed(1)} ms`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

const server = arg('--url')
  ? { url: arg('--url'), token: arg('--token') || '', stop: async () => {} }
  : await startServer({ gpus: 1, auth: true, logName: 'bench-server.log' });
let browser;
try {
  if (!arg('--url')) await fill();

  let t = performance.now();
  const list = await fetch(`${server.url}/api/v1/jobs`, { headers: { Authorization: `Bearer ${server.token}` } });
  const listBody = await list.text();
  const jobCount = JSON.parse(listBody).jobs.length;
  console.log(`GET /api/v1/jobs: ${jobCount} jobs, ${(Buffer.byteLength(listBody) / 1e6).toFixed(1)} MB in ${ms(performance.now() - t)}`);

  t = performance.now();
  const snapshotBytes = await firstEventBytes(`${server.url}/api/v1/watch/jobs`, server.token);
  console.log(`watch/jobs snapshot: ${(snapshotBytes / 1e6).toFixed(1)} MB in ${ms(performance.now() - t)}`);

  browser = await launchBrowser({ viewport: { width: 1400, height: 900 } });
  const page = await browser.context.newPage();
  const cdp = await browser.context.newCDPSession(page);
  await cdp.send('Performance.enable');

  const total = jobCount.toLocaleString('en-US');
  await page.goto(`${server.url}/ui/#token=${server.token}`);
  const firstRender = await page.waitForFunction((expected) => {
    const count = document.querySelector('.jobs-view .count')?.textContent || '';
    return document.querySelector('[data-job]') && count.startsWith(`${expected} jobs`) && performance.now();
  }, total, { polling: 'raf', timeout: 120000 });
  console.log(`first render of the list (navigation -> ${total} jobs listed): ${ms(await firstRender.jsonValue())}`);
  console.log(`rows in the DOM: ${await page.locator('[data-job]:not([hidden])').count()}, DOM nodes: ${await page.evaluate(() => document.getElementsByTagName('*').length)}`);

  // Filters: from the input/change event to the rows laid out after the re-render.
  const timeFilter = (how) => page.evaluate(async ({ kind, value }) => {
    const target = document.querySelector(kind === 'search' ? '.jobs-view .search' : `.jobs-view .filter-${kind}`);
    const start = performance.now();
    target.value = value;
    target.dispatchEvent(new Event(kind === 'search' ? 'input' : 'change'));
    // The view re-renders in the next animation frame; this callback runs right after it.
    await new Promise((resolve) => requestAnimationFrame(resolve));
    void document.querySelector('.jobs-view .vscroll').offsetHeight;  // include style and layout
    return performance.now() - start;
  }, how);
  const filters = [
    ['search "q-09"', { kind: 'search', value: 'q-09' }, { kind: 'search', value: '' }],
    ['search "q-0123"', { kind: 'search', value: 'q-0123' }, { kind: 'search', value: '' }],
    ['state = Queued', { kind: 'state', value: 'Queued' }, { kind: 'state', value: '' }],
    ['team = nlp', { kind: 'team', value: 'nlp' }, { kind: 'team', value: '' }],
  ];
  for (const [label, apply, clear] of filters) {
    const applied = [];
    const cleared = [];
    const start = metrics(await cdp.send('Performance.getMetrics'));
    for (let i = 0; i < 5; i++) {
      applied.push(await timeFilter(apply));
      cleared.push(await timeFilter(clear));
    }
    const end = metrics(await cdp.send('Performance.getMetrics'));
    const busy = ((end.TaskDuration - start.TaskDuration) * 1000) / 10;
    console.log(`filter ${label}: ${ms(median(applied))} to apply, ${ms(median(cleared))} to clear `
      + `(median of 5, until the next frame is laid out); main-thread work ${ms(busy)} per change`);
  }

  // Sorting: from the header click to the rows laid out, each column twice
  // (ascending, descending), then back to the default order.
  const timeSort = (key) => page.evaluate(async (column) => {
    const header = document.querySelector(`.jobs-table .head [data-sort="${column}"]`);
    if (!header) return NaN;  // a dashboard without sortable columns
    const start = performance.now();
    header.click();
    await new Promise((resolve) => requestAnimationFrame(resolve));
    void document.querySelector('.jobs-view .vscroll').offsetHeight;
    return performance.now() - start;
  }, key);
  for (const column of ['name', 'step', 'team']) {
    const times = [];
    for (let i = 0; i < 4; i++) times.push(await timeSort(column));
    console.log(`sort by ${column}: ${ms(median(times))} per click (median of 4, until the next frame is laid out)`);
  }
  await timeSort('age');

  // Scrolling, 240 frames each: a wheel-like 120 px a frame, then a fling of
  // 600 px a frame with jumps to the bottom and back. Frame intervals come from
  // requestAnimationFrame timestamps, main-thread work from Chromium's
  // Performance metrics over the run.
  for (const [label, pixels] of [['wheel, 120 px/frame', 120], ['fling, 600 px/frame', 600]]) {
    const before = metrics(await cdp.send('Performance.getMetrics'));
    const frames = await page.evaluate(async (step) => {
      const scroller = document.querySelector('.jobs-view .vscroll');
      scroller.scrollTop = 0;
      const stamps = [];
      for (let i = 0; i < 240; i++) {
        const jump = step > 200 && (i === 200 ? scroller.scrollHeight : i === 220 ? 0 : null);
        scroller.scrollTop = jump === null || jump === false ? scroller.scrollTop + step : jump;
        stamps.push(await new Promise((resolve) => requestAnimationFrame(resolve)));
      }
      return stamps.slice(1).map((s, i) => s - stamps[i]);
    }, pixels);
    const after = metrics(await cdp.send('Performance.getMetrics'));
    const work = (key) => ((after[key] - before[key]) * 1000) / frames.length;
    console.log(`scroll (${label}): frame interval median ${ms(median(frames))}, p95 ${ms(percentile(frames, 0.95))}, `
      + `max ${ms(Math.max(...frames))}; main-thread work per frame ${ms(work('TaskDuration'))} `
      + `(script ${ms(work('ScriptDuration'))}, style ${ms(work('RecalcStyleDuration'))}, layout ${ms(work('LayoutDuration'))})`);
  }
  const visible = await page.locator('[data-job]:not([hidden])').count();
  console.log(`rows in the DOM after scrolling: ${visible}`);

  await cdp.send('HeapProfiler.enable');
  await cdp.send('HeapProfiler.collectGarbage');
  const heap = await cdp.send('Runtime.getHeapUsage');
  console.log(`JS heap after GC: ${(heap.usedSize / 1e6).toFixed(1)} MB used of ${(heap.totalSize / 1e6).toFixed(1)} MB`);
} finally {
  await browser?.close();
  await server.stop();
}

// One job that holds the only GPU, then JOBS jobs that each wait for a GPU.
async function fill() {
  const blocker = await server.api('POST', '/api/v1/jobs', trainJob('blocker', { steps: 100000, delay: 1, gpus: 1 }));
  if (blocker.status !== 201) throw new Error(`blocker: ${blocker.status} ${JSON.stringify(blocker.body)}`);
  for (let i = 0; i < 50; i++) {
    if ((await server.api('GET', '/api/v1/jobs/blocker')).body.state === 'Running') break;
    await sleep(100);
  }

  let next = 0;
  const submitStart = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let i = next++; i < JOBS; i = next++) {
      const name = `q-${String(i).padStart(5, '0')}`;
      const { status, body } = await server.api('POST', '/api/v1/jobs', {
        name, team: TEAMS[i % TEAMS.length], command: ['/bin/true'], resources: { gpus_per_process: 1 },
      });
      if (status !== 201) throw new Error(`${name}: ${status} ${JSON.stringify(body)}`);
    }
  }));
  const submitMs = performance.now() - submitStart;
  console.log(`submitted ${JOBS} queued jobs: ${(submitMs / 1000).toFixed(1)} s (${Math.round(JOBS / (submitMs / 1000))} jobs/s, ${CONCURRENCY} concurrent requests)`);

}

function metrics({ metrics: list }) {
  return Object.fromEntries(list.map(({ name, value }) => [name, value]));
}

// Bytes of the first message of an event stream (the jobs snapshot).
async function firstEventBytes(url, token) {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { Authorization: `Bearer ${token}` }, signal: controller.signal });
  const reader = response.body.getReader();
  let bytes = 0;
  let tail = '';
  let seenData = false;
  const decoder = new TextDecoder();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    bytes += value.byteLength;
    const text = decoder.decode(value, { stream: true });
    seenData ||= text.includes('data:');
    tail = (tail + text).slice(-4);
    if (seenData && tail.endsWith('\n\n')) break;
  }
  controller.abort();
  return bytes;
}
