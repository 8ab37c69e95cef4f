// Shared by the tests: the repository root, a check that no process of a run is left behind.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const PKG = path.dirname(HERE);
export const SRCDIR = process.env.AB_SRCDIR || path.resolve(PKG, '..', '..');

/** PIDs of processes whose command line holds `token`. */
export function procsWith(token) {
  const found = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`).includes(token)) found.push(Number(pid));
    } catch { /* gone */ }
  }
  return found;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function isRoot() {
  return typeof process.geteuid === 'function' && process.geteuid() === 0;
}
