// What the acp provider's test files share: a file an agent logs its events to, one JSON line
// each, and whether a process it started is still alive.
import { appendFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh, empty log file for one agent, and the events written to it so far. */
export function agentLog<E>(): { path: string; events(): E[] } {
  const path = join(mkdtempSync(join(tmpdir(), 'subagent-acp-log-')), 'agent.jsonl');
  appendFileSync(path, '');
  return {
    path,
    // Whole lines only: the last may still be being written (under load, a read took half of one).
    events: () => {
      const written = readFileSync(path, 'utf8');
      return written
        .slice(0, written.lastIndexOf('\n') + 1)
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as E);
    },
  };
}

/** Whether the process `pid` is still running (signal 0 tests it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
