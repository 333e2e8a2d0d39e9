// Shared by dashboard.test.mjs and bench/dashboard_bench.mjs: a real `headway server` in
// a fresh data dir, a REST client for it, and headless Chromium.
//
// Environment:
//   HEADWAY_BIN     the binary (default: <repo>/build/headway)
//   HEADWAY_WEB_DIR serve the dashboard from this folder (--web-dir) instead of
//                   the copy built into the binary, e.g. web/ while editing it
//   ARTIFACTS_DIR   screenshots and server logs (default: <repo>/build/browser-artifacts)
//   CHROMIUM_BIN    the browser (default: /usr/bin/chromium)

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const headwayBin = process.env.HEADWAY_BIN || path.join(repoRoot, 'build/headway');
export const artifactsDir = process.env.ARTIFACTS_DIR || path.join(repoRoot, 'build/browser-artifacts');
const chromiumBin = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const webDir = process.env.HEADWAY_WEB_DIR ? path.resolve(process.env.HEADWAY_WEB_DIR) : '';

const ENDED = new Set(['Succeeded', 'Failed', 'Stopped']);

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts `headway server --listen 127.0.0.1:0 --data-dir <fresh> --gpus N
// [--no-auth] [extra...]` and resolves once it listens (authentication is
// on unless `auth` is false). The server's output goes
// to ARTIFACTS_DIR/<logName>. `bin` and `web` replace HEADWAY_BIN and
// HEADWAY_WEB_DIR for this server (web: '' serves the built-in copy).
export async function startServer({
  gpus = 2, auth = true, extra = [], logName = 'server.log', bin = headwayBin, web = webDir,
} = {}) {
  fs.mkdirSync(artifactsDir, { recursive: true });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headway-browser-'));
  const args = ['server', '--listen', '127.0.0.1:0', '--data-dir', dataDir, '--gpus', String(gpus)];
  if (!auth) args.push('--no-auth');
  if (web) args.push('--web-dir', web);
  args.push(...extra);
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const log = fs.createWriteStream(path.join(artifactsDir, logName));
  let output = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`headway server did not start in 15 s:\n${output}`)), 15000);
    const onData = (chunk) => {
      log.write(chunk);
      if (output.length < 65536) output += chunk;
      const match = output.match(/headway server listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', (error) => { clearTimeout(timer); reject(error); });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`headway server exited (${code}):\n${output}`)); });
  });
  child.removeAllListeners('exit');
  const token = auth ? fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim() : '';
  const server = { url, token, dataDir, child };
  server.api = (method, route, body) => api(server, method, route, body);
  server.stop = () => stopServer(server, log);
  return server;
}

// -> {status, body}; body parsed as JSON when it is JSON.
export async function api(server, method, route, body, token = server.token) {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(server.url + route, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed = text;
  try { parsed = JSON.parse(text); } catch { /* text */ }
  return { status: response.status, body: parsed };
}

// Stops the jobs that run (their processes outlive the server otherwise) and
// the queued ones (which the GPUs freed would start meanwhile, writing into
// the data dir as it is removed), then the server, and removes its data dir.
async function stopServer(server, log) {
  try {
    const inStates = async (states) => {
      const lists = await Promise.all(states.map((state) => server.api('GET', `/api/v1/jobs?state=${state}`)));
      return lists.flatMap(({ body }) => (body.jobs || []).map((j) => j.name));
    };
    const running = () => inStates(['Starting', 'Running']);
    const queued = await inStates(['Queued']);
    await Promise.all(queued.map((name) => server.api('POST', `/api/v1/jobs/${name}/stop`, { reason: 'test teardown' })));
    let names = await running();
    await Promise.all(names.map((name) => server.api('POST', `/api/v1/jobs/${name}/stop`, { reason: 'test teardown' })));
    for (let i = 0; i < 100 && names.length; i++) {
      await sleep(200);
      names = await running();
    }
  } catch { /* the server may already be gone */ }
  if (server.child.exitCode === null) {
    const exited = new Promise((resolve) => server.child.once('exit', resolve));
    server.child.kill('SIGTERM');
    const timer = setTimeout(() => server.child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  }
  log.end();
  // A job's supervisor may still be closing its log: retried, not failed.
  fs.rmSync(server.dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
}

// Headless Chromium with a new, empty profile; close() also removes the profile.
export async function launchBrowser({ viewport = { width: 1400, height: 900 } } = {}) {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headway-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumBin,
    headless: true,
    viewport,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
    ],
  });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

// A training loop that needs nothing but python3: one HEADWAY progress line
// (parsed by the server from stdout) and one log line per step.
// argv: total_steps seconds_per_step
export const TRAIN_PY = `
import json, math, sys, time
total, delay = int(sys.argv[1]), float(sys.argv[2])
for step in range(1, total + 1):
    loss = 2.0 * math.exp(-step / 80.0) + 0.05
    metrics = {"loss": loss, "learning_rate": 1e-3 * (1 - step / total), "grad_norm": 1.0 + 0.2 * math.sin(step)}
    if step % 5 == 0:
        metrics["eval_loss"] = loss * 1.1
    print("HEADWAY " + json.dumps({"step": step, "total_steps": total, "metrics": metrics}), flush=True)
    print("step %d loss %.4f" % (step, loss), flush=True)
    time.sleep(delay)
`;

export function trainJob(name, { steps = 400, delay = 0.25, team = 'vision', gpus = 0, extra = {} } = {}) {
  return {
    name,
    team,
    command: ['/usr/bin/python3', '-u', '-c', TRAIN_PY, String(steps), String(delay)],
    resources: { gpus_per_process: gpus },
    termination_grace: '3s',
    ...extra,
  };
}

export function isEnded(state) {
  return ENDED.has(state);
}
