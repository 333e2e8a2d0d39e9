// Formatting functions shared by the views: every number, time and
// duration the dashboard shows goes through one of these. Pure functions, no
// DOM access except el(), bar() and badge(), which build elements without
// going through innerHTML.

export const ENDED_STATES = new Set(['Succeeded', 'Failed', 'Stopped']);
export const JOB_STATES = ['Queued', 'Starting', 'Running', 'Succeeded', 'Failed', 'Stopped', 'Preempted'];
export const HEALTHS = ['Progressing', 'Stalled', 'Diverging', 'Plateaued', 'Overfitting', 'Unknown'];

// Seconds as "42s", "4m12s", "2h05m", "3d04h".
export function duration(seconds) {
  if (seconds == null || !Number.isFinite(seconds)) return '';
  let s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const pad = (n) => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86400)}d${pad(Math.floor((s % 86400) / 3600))}h`;
}

// Time since an RFC 3339 timestamp, as duration() writes it.
export function age(timestamp, now = Date.now()) {
  const t = Date.parse(timestamp);
  if (Number.isNaN(t)) return '';
  return duration((now - t) / 1000);
}

// A metric value: a number, or "NaN" / "Infinity" / "-Infinity" as the API writes
// non-finite values, or null.
export function metric(value) {
  if (value == null) return '';
  if (typeof value === 'string') return value;
  if (value === 0) return '0';
  const a = Math.abs(value);
  if (a >= 1e5 || a < 1e-3) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}

// A training step, compact for axis ticks: 950, 12.5k, 1.25M.
export function step(n) {
  if (n == null || !Number.isFinite(n)) return '';
  const a = Math.abs(n);
  if (a >= 1e6) return `${+(n / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${+(n / 1e3).toFixed(1)}k`;
  return String(n);
}

// "step/total" or "step", as the jobs list and the panel write progress.
export function stepOf(progress) {
  const p = progress || {};
  if (p.step == null) return '';
  return p.total_steps ? `${p.step}/${p.total_steps}` : String(p.step);
}

// A count with thousands separators: 10,000. Grouped here rather than by
// toLocaleString(), whose first call loads the number formats: about 50 ms
// of the jobs list's first render on a 2-core machine.
export function count(n) {
  if (n == null || !Number.isFinite(n)) return '';
  const text = String(Math.abs(n));
  const dot = text.indexOf('.');
  const whole = dot < 0 ? text : text.slice(0, dot);
  if (!/^\d+$/.test(whole)) return String(n);  // 1e+21 and beyond
  const grouped = whole.replace(/\B(?=(\d{3})+$)/g, ',');
  return `${n < 0 ? '-' : ''}${grouped}${dot < 0 ? '' : text.slice(dot)}`;
}

// A size in bytes in binary units: "512 B", "1.5 KiB", "2.00 GiB" (three significant digits).
export function bytes(n) {
  if (n == null || !Number.isFinite(n)) return '';
  if (Math.abs(n) < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let value = n / 1024;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${Math.abs(value) >= 100 ? value.toFixed(0) : Math.abs(value) >= 10 ? value.toFixed(1) : value.toFixed(2)} ${units[unit]}`;
}

export function number(value, digits = 1) {
  if (value == null || !Number.isFinite(value)) return '';
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

export function percent(value) {
  if (value == null || !Number.isFinite(value)) return '';
  return `${Math.floor(value)}%`;
}

export function dateTime(timestamp) {
  if (!timestamp) return '';
  const d = new Date(timestamp);
  if (Number.isNaN(d.getTime())) return timestamp;
  return d.toLocaleString(undefined, { hour12: false });
}

// Time of day of an RFC 3339 timestamp, 24-hour: "14:05:09".
export function clock(timestamp) {
  if (!timestamp) return '';
  const d = new Date(timestamp);
  if (Number.isNaN(d.getTime())) return timestamp;
  return d.toLocaleTimeString(undefined, { hour12: false });
}

// el('td', {class: 'x', dataset: {job: 'a'}, onclick: f}, 'text', child...)
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value == null || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key === 'dataset') Object.assign(node.dataset, value);
      else if (key === 'style') node.style.cssText = value;
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else if (key in node && typeof value !== 'string') node[key] = value;
      else node.setAttribute(key, value === true ? '' : value);
    }
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function badge(kind, value) {
  return el('span', { class: `badge ${kind}-${String(value || 'none').toLowerCase()}` }, value || '-');
}

// A horizontal bar: fraction in [0, 1]; tone, if given, a class for its
// colour (barTone()).
export function bar(fraction, label, tone) {
  return el('span', { class: 'bar-cell' },
    el('span', { class: 'bar' }, el('span', { class: `bar-fill${tone ? ` ${tone}` : ''}`, style: `width:${barWidth(fraction * 100)}` })),
    label == null ? null : el('span', { class: 'bar-label' }, label));
}

// The CSS width of a progress bar at `pct` percent.
export function barWidth(pct) {
  return pct == null || !Number.isFinite(pct) ? '0%' : `${Math.max(0, Math.min(100, pct)).toFixed(1)}%`;
}

// The colour class of a job's progress bar: by health while it runs
// (diverging red, stalled amber, plateaued purple, overfitting pink;
// progressing or unknown blue), by outcome once it ended (succeeded green,
// failed red, stopped grey), except that a run whose final verdict is bad
// keeps that verdict's colour: a diverged run that exited 0 is not green.
export function barTone(job) {
  const health = String(job.health || '').toLowerCase();
  const bad = ['diverging', 'stalled', 'plateaued', 'overfitting'].includes(health);
  if (ENDED_STATES.has(job.state)) {
    return bad && job.state !== 'Failed' ? `tone-${health}` : `tone-${job.state.toLowerCase()}`;
  }
  return bad ? `tone-${health}` : 'tone-normal';
}
