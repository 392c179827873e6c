// `npm run cluster -- start|stop|status`: a multi-service Temporal cluster on PostgreSQL on this
// machine, with its data, configuration and logs under .data/cluster/ (src/testing/cluster.ts).
// `start` builds the pinned server on first use, starts everything in the background and prints
// the frontend's address; `stop` stops it (the data stays); `status` says what runs.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { startCluster } from '../src/testing/cluster';

const DIR = resolve(__dirname, '..', '.data', 'cluster');
const STATE = join(DIR, 'cluster.json');

interface State {
  address: string;
  postgres: { port: number; pid?: number };
  services: { instance: string; pid?: number }[];
}

const alive = (pid: number | undefined) => {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const readState = (): State | undefined =>
  existsSync(STATE) ? (JSON.parse(readFileSync(STATE, 'utf8')) as State) : undefined;

async function start(): Promise<void> {
  const state = readState();
  if (state && state.services.some((service) => alive(service.pid))) {
    console.log(`already running: TEMPORAL_ADDRESS=${state.address}`);
    return;
  }
  // Started again, it runs on the data it had: its namespace, runs and histories.
  const cluster = await startCluster({ dir: DIR, historyHosts: 1, detached: true, log: (line) => console.log(line) });
  const next: State = {
    address: cluster.address,
    postgres: { port: cluster.postgres.port, ...(cluster.postgres.pid() ? { pid: cluster.postgres.pid() } : {}) },
    services: cluster.services.map((service) => ({
      instance: service.instance,
      ...(service.pid() ? { pid: service.pid() } : {}),
    })),
  };
  writeFileSync(STATE, JSON.stringify(next, null, 2));
  console.log(`TEMPORAL_ADDRESS=${cluster.address}`);
}

async function stop(): Promise<void> {
  const state = readState();
  if (!state) {
    console.log('no cluster was started here');
    return;
  }
  const pids = [...state.services.map((service) => service.pid), state.postgres.pid].filter(alive);
  for (const pid of pids) process.kill(pid!, pid === state.postgres.pid ? 'SIGINT' : 'SIGTERM');
  while (pids.some(alive)) await new Promise((resolvePid) => setTimeout(resolvePid, 100));
  rmSync(STATE);
  console.log('stopped');
}

async function status(): Promise<number> {
  const state = readState();
  if (!state) {
    console.log('not running');
    return 1;
  }
  for (const service of state.services) {
    console.log(`${service.instance.padEnd(10)} ${alive(service.pid) ? `pid ${service.pid}` : 'down'}`);
  }
  console.log(
    `${'postgres'.padEnd(10)} ${alive(state.postgres.pid) ? `pid ${state.postgres.pid}, port ${state.postgres.port}` : 'down'}`,
  );
  try {
    const connection = await Connection.connect({ address: state.address, connectTimeout: 3000 });
    await connection.workflowService.describeNamespace({ namespace: 'default' });
    await connection.close();
    console.log(`serving: TEMPORAL_ADDRESS=${state.address}`);
    return 0;
  } catch (err) {
    console.log(`not serving on ${state.address}: ${(err as Error).message.split('\n')[0]}`);
    return 1;
  }
}

async function main(): Promise<number> {
  const command = process.argv[2];
  if (command === 'start') await start();
  else if (command === 'stop') await stop();
  else if (command === 'status') return status();
  else {
    console.error('usage: npm run cluster -- start|stop|status');
    return 2;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
