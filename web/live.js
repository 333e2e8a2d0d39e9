// Live data for the views: the server's event streams, or, on a server that
// has no watch endpoints (404), the same messages built by polling the REST API
// every POLL_MS. Each watch returns {close()}.

import { request, jobPath } from './api.js';
import { openEventStream } from './sse.js';

const POLL_MS = 2000;

// Calls a function now and then every `ms` until close(); skips a round while
// the previous one still runs. The function gets an AbortSignal.
export function poll(fn, ms = POLL_MS) {
  const controller = new AbortController();
  let timer = 0;
  const round = async () => {
    try {
      await fn(controller.signal);
    } catch (error) {
      if (!controller.signal.aborted && error.status !== 401) console.warn('headway:', error.message);
    }
    if (!controller.signal.aborted) timer = setTimeout(round, ms);
  };
  round();
  return { close() { controller.abort(); clearTimeout(timer); } };
}

// handlers: onSnapshot(jobs) replaces every job, onUpdate(jobs) changes some,
// onDeleted(names) removes some, onStatus('live' | 'reconnecting' | 'polling').
// Jobs arrive in the stream's compact form (a row of what the list shows, a
// fifth of a full view) and are handed on as views with those members.
export function watchJobs({ onSnapshot, onUpdate, onDeleted, onStatus }) {
  let fallback = null;
  const stream = openEventStream('/api/v1/watch/jobs?compact=true', {
    onStatus,
    onMessage(type, data) {
      if (type === 'snapshot') onSnapshot(jobsFromRows(data));
      else if (type === 'update') onUpdate(jobsFromRows(data));
      else if (type === 'deleted') onDeleted(data.names || []);
    },
    onUnsupported() {
      onStatus('polling');
      fallback = poll(async (signal) => onSnapshot((await request('/api/v1/jobs', { signal })).jobs || []));
    },
  });
  return { close() { stream.close(); fallback?.close(); } };
}

// The views in a compact jobs message ({columns, rows}), with the members
// the rows carry; a server's full views ({jobs}) as they are.
export function jobsFromRows({ columns, rows, jobs }) {
  if (!Array.isArray(rows)) return jobs || [];
  const at = {};
  (columns || []).forEach((column, i) => { at[column] = i; });
  return rows.map((r) => {
    const loss = r[at.loss];
    return {
      name: r[at.name],
      team: r[at.team],
      state: r[at.state],
      health: r[at.health],
      health_reason: r[at.health_reason],
      gpus: r[at.gpus],
      created_at: r[at.created_at],
      pending_reason: r[at.pending_reason],
      progress: {
        percent: r[at.percent],
        step: r[at.step],
        total_steps: r[at.total_steps],
        eta_seconds: r[at.eta_seconds],
        metrics: loss == null ? {} : { loss },
      },
    };
  });
}

// handlers: onOpen() before a fresh series (reset) arrives, onJob(view),
// onSeries({reset, metrics: {name: {steps, values}}}), onEvents(events),
// onError(error) when the job cannot be read, onStatus as above.
export function watchJob(name, buckets, handlers) {
  const { onOpen = () => {}, onJob, onSeries, onEvents, onError = () => {}, onStatus } = handlers;
  let fallback = null;
  const stream = openEventStream(`${jobPath(name)}/watch?buckets=${buckets}`, {
    onOpen,
    onStatus,
    onMessage(type, data) {
      if (type === 'job') onJob(data);
      else if (type === 'series') onSeries(data);
      else if (type === 'events') onEvents(data.events || []);
    },
    onUnsupported() {
      onStatus('polling');
      let lastEvent = 0;
      fallback = poll(async (signal) => {
        let job;
        try {
          job = await request(jobPath(name), { signal });
        } catch (error) {
          if (error.status === 404) onError(error);
          throw error;
        }
        onJob(job);
        const { events = [] } = await request(`${jobPath(name)}/events?after=${lastEvent}`, { signal });
        if (events.length) {
          lastEvent = events[events.length - 1].id;
          onEvents(events);
        }
        const { metrics: names = [] } = await request(`${jobPath(name)}/metrics`, { signal });
        const metrics = {};
        await Promise.all(names.map(async (metric) => {
          const series = await request(`${jobPath(name)}/metrics/${encodeURIComponent(metric)}?buckets=${buckets}`, { signal });
          metrics[metric] = seriesFromRest(series);
        }));
        onSeries({ reset: true, metrics });
      });
    },
  });
  return { close() { stream.close(); fallback?.close(); } };
}

// GET .../metrics/NAME answers points, or buckets when downsampled; charts want
// {steps, values} with null for non-finite values, as the stream sends them.
export function seriesFromRest(series) {
  const finite = (v) => (typeof v === 'number' ? v : null);
  if (Array.isArray(series.buckets)) {
    return { steps: series.buckets.map((b) => b.last_step), values: series.buckets.map((b) => finite(b.last)) };
  }
  const points = series.points || [];
  return { steps: points.map((p) => p.step), values: points.map((p) => finite(p.value)) };
}
