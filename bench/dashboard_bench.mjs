// The dashboard with many jobs (default 10,000) in headless Chromium. Prints
// figures; asserts nothing.
//
//   (cd tests/e2e/browser && npm ci)    # playwright-core; the browser is /usr/bin/chromium
//   node bench/dashboard_bench.mjs [--jobs N] [--loads K] [--compare BIN]
//
// First render: a server with --gpus 1 gets one job that holds the GPU and N
// jobs that each need one (submitted concurrently), so they stay Queued. The
// dashboard is then loaded K times (default 5), each in a new tab with the
// browser's cache emptied, and timed from navigation to the list showing
// every job; the page's own marks say when its scripts started, when it had
// signed in, when the jobs stream opened and when its snapshot arrived. The
// same with the one job alone (what the page costs without the list), and
// the snapshot's size as the page asks for it, plain and gzipped.
// With --compare BIN: all of that again for another build (its built-in
// dashboard), one after the other, printed side by side with ratios.
// Then, on this build only: filters, sorting, scrolling, the JS heap and the
// DOM's size.
// Environment as for the browser tests (tests/e2e/browser/harness.mjs).

import http from 'node:http';
import zlib from 'node:zlib';
import { headwayBin, launchBrowser, sleep, startServer, trainJob } from '../tests/e2e/browser/harness.mjs';

const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const JOBS = Number(arg('--jobs') || 10000);
const LOADS = Number(arg('--loads') || 5);
const COMPARE = arg('--compare');
const CONCURRENCY = 32;
const TEAMS = ['vision', 'nlp', 'speech', 'rl', 'research'];

const ms = (v) => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : '-');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

const builds = [{ label: 'this build', bin: headwayBin, web: undefined }];
if (COMPARE) builds.push({ label: 'compared', bin: COMPARE, web: '' });

let browser = await launchBrowser({ viewport: { width: 1400, height: 900 } });
try {
  for (const build of builds) {
    build.full = await measureLoads(build, JOBS, build === builds[0] ? interaction : null);
    build.alone = await measureLoads(build, 0);
  }
  printLoads();
} finally {
  await browser?.close();
}

// Starts `build`'s server with the blocker and `jobs` queued jobs, loads the
// dashboard LOADS times, runs `then(server)` if given, stops the server.
async function measureLoads(build, jobs, then) {
  const server = await startServer({ gpus: 1, auth: true, bin: build.bin, web: build.web, logName: 'bench-server.log' });
  try {
    await fill(server, jobs);
    const out = { loads: [], snapshot: await snapshotSize(server) };
    const expected = (jobs + 1).toLocaleString('en-US');
    for (let i = 0; i < LOADS; i++) out.loads.push(await loadOnce(server, expected));
    await then?.(server);
    return out;
  } finally {
    await server.stop();
  }
}

async function loadOnce(server, expected) {
  const page = await browser.context.newPage();
  try {
    const cdp = await browser.context.newCDPSession(page);
    await cdp.send('Network.clearBrowserCache');
    await page.goto(`${server.url}/ui/#token=${server.token}`);
    const rendered = await page.waitForFunction((total) => {
      const count = document.querySelector('.jobs-view .count')?.textContent || '';
      return document.querySelector('[data-job]') && count.startsWith(`${total} job`) && performance.now();
    }, expected, { polling: 'raf', timeout: 120000 });
    const marks = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('mark')
      .map((m) => [m.name.replace(/^headway:/, '').replace(/ .*/, ''), m.startTime])));
    return { render: await rendered.jsonValue(), ...marks };
  } finally {
    await page.close();
  }
}

function printLoads() {
  const cols = builds.map((b) => b.label.padStart(18)).join('');
  const ratio = COMPARE ? '   ratio' : '';
  console.log(`\nfirst render, navigation -> every job listed, median of ${LOADS} loads in new tabs with an empty cache:`);
  console.log(`${''.padEnd(42)}${cols}${ratio}`);
  const row = (label, values, format) => {
    const cells = values.map((v) => format(v).padStart(18)).join('');
    const r = COMPARE && Number.isFinite(values[0]) && Number.isFinite(values[1]) && values[1] > 0
      ? `   ${(values[0] / values[1]).toFixed(2)}x` : '';
    console.log(`${label.padEnd(42)}${cells}${r}`);
  };
  for (const [what, key] of [[`${(JOBS + 1).toLocaleString('en-US')} jobs`, 'full'], ['1 job (the page without the list)', 'alone']]) {
    const pick = (b, field) => median(b[key].loads.map((l) => l[field] ?? NaN));
    row(`${what}: listed`, builds.map((b) => pick(b, 'render')), ms);
    console.log('  min - max'.padEnd(42) + builds.map((b) => {
      const r = b[key].loads.map((l) => l.render);
      return `${Math.min(...r).toFixed(0)} - ${Math.max(...r).toFixed(0)} ms`.padStart(18);
    }).join(''));
    for (const [label, field] of [['  scripts started', 'start'], ['  signed in', 'signed-in'],
      ['  jobs stream open', 'stream-open'], ['  snapshot parsed', 'jobs-snapshot']]) {
      row(label, builds.map((b) => pick(b, field)), ms);
    }
  }
  const mb = (v) => (Number.isFinite(v) ? `${(v / 1e6).toFixed(2)} MB` : '-');
  row('snapshot as the page asks for it, plain', builds.map((b) => b.full.snapshot.plain), mb);
  row('  gzipped (on the wire)', builds.map((b) => b.full.snapshot.gzip), mb);
  row('  time to receive it (gzip)', builds.map((b) => b.full.snapshot.ms), ms);
  console.log('  (the page\'s marks are "-" for a build without them)');
}

// Filters, sorting, scrolling, heap and DOM on this build with JOBS jobs.
async function interaction(server) {
  const page = await browser.context.newPage();
  try {
    const cdp = await browser.context.newCDPSession(page);
    await cdp.send('Performance.enable');
    await page.goto(`${server.url}/ui/#token=${server.token}`);
    const total = (JOBS + 1).toLocaleString('en-US');
    await page.waitForFunction((expected) => (document.querySelector('.jobs-view .count')?.textContent || '')
      .startsWith(`${expected} jobs`), total, { polling: 'raf', timeout: 120000 });
    console.log(`\nthis build, ${total} jobs listed:`);
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
    await page.close();
  }
}

// One job that holds the only GPU, then JOBS jobs that each wait for a GPU.
async function fill(server, jobs) {
  const blocker = await server.api('POST', '/api/v1/jobs', trainJob('blocker', { steps: 100000, delay: 1, gpus: 1 }));
  if (blocker.status !== 201) throw new Error(`blocker: ${blocker.status} ${JSON.stringify(blocker.body)}`);
  for (let i = 0; i < 50; i++) {
    if ((await server.api('GET', '/api/v1/jobs/blocker')).body.state === 'Running') break;
    await sleep(100);
  }

  let next = 0;
  const submitStart = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let i = next++; i < jobs; i = next++) {
      const name = `q-${String(i).padStart(5, '0')}`;
      const { status, body } = await server.api('POST', '/api/v1/jobs', {
        name, team: TEAMS[i % TEAMS.length], command: ['/bin/true'], resources: { gpus_per_process: 1 },
      });
      if (status !== 201) throw new Error(`${name}: ${status} ${JSON.stringify(body)}`);
    }
  }));
  const submitMs = performance.now() - submitStart;
  if (jobs) console.log(`${server.url}: submitted ${jobs} queued jobs: ${(submitMs / 1000).toFixed(1)} s (${Math.round(jobs / (submitMs / 1000))} jobs/s, ${CONCURRENCY} concurrent requests)`);

}

function metrics({ metrics: list }) {
  return Object.fromEntries(list.map(({ name, value }) => [name, value]));
}

// The jobs stream's snapshot as this build's page asks for it (compact; the
// full views from a server without compact rows): bytes plain and gzipped,
// and the time from the request until it was whole.
async function snapshotSize(server) {
  const once = (path) => new Promise((resolve, reject) => {
    const start = performance.now();
    const request = http.get(`${server.url}${path}`, {
      headers: { Authorization: `Bearer ${server.token}`, 'Accept-Encoding': 'gzip' },
    }, (response) => {
      if (response.statusCode !== 200) {
        response.resume();
        resolve(null);
        return;
      }
      let gzip = 0;
      let plain = 0;
      let tail = '';
      const gunzip = zlib.createGunzip();
      response.on('data', (chunk) => { gzip += chunk.length; });
      response.pipe(gunzip);
      gunzip.on('data', (chunk) => {
        plain += chunk.length;
        tail = (tail + chunk.toString('latin1')).slice(-2);
        if (tail === '\n\n') {
          request.destroy();
          resolve({ plain, gzip, ms: performance.now() - start });
        }
      });
      gunzip.on('error', reject);
    });
    request.on('error', (error) => { if (!request.destroyed) reject(error); });
  });
  return (await once('/api/v1/watch/jobs?compact=true')) || once('/api/v1/watch/jobs');
}
