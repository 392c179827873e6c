// Our side of the agent-loop figure (10), in a process of its own like the peer's (bench/peer/run.ts,
// whose JSON-lines protocol it speaks): a subagent worker hosting the spawn provider against the
// bench's fake model, and the service that starts its runs, on one connection.
//   node --import tsx bench/ours.ts --address HOST:PORT --namespace NS --base-url URL/v1 --model ID --dir DIR --payload-dir DIR
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { TemporalSubagentService } from '../src';
import { connectTemporal, createSpawnProvider, createSubagentWorker } from '../src/worker';
import { modelCalls, toolLoop } from './tool-loop';

const send = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const { values } = parseArgs({
    options: Object.fromEntries(
      ['address', 'namespace', 'base-url', 'model', 'dir', 'payload-dir'].map((name) => [name, { type: 'string' }]),
    ) as Record<string, { type: 'string' }>,
  });
  const option = (name: string) => values[name] ?? missing(name);
  const temporal = await connectTemporal({
    env: {
      TEMPORAL_ADDRESS: option('address'),
      TEMPORAL_NAMESPACE: option('namespace'),
      SUBAGENT_PAYLOAD_STORE: `file:${option('payload-dir')}`,
    },
  });
  try {
    // The bench's spawn provider and worker settings, under a name of its own: a provider's name is
    // its task queue, and the bench's process hosts `spawn` too. Without eager activity dispatch
    // (the server's default) the two workers took each other's model calls, so each side's
    // figures measured some of the other's work (and while their payload stores differed, figure
    // 5's longest run failed on a payload the other worker had stored).
    const spawn = createSpawnProvider({
      name: 'spawn-loop',
      endpoint: { baseURL: option('base-url'), model: option('model') },
      runSettings: { maxStepsPerTurn: 1000 },
    });
    const worker = await createSubagentWorker({
      connection: temporal.connection,
      namespace: temporal.namespace,
      providers: [spawn],
      ...(temporal.dataConverter ? { dataConverter: temporal.dataConverter } : {}),
    });
    const service = new TemporalSubagentService({ client: temporal.client });
    service.registerProvider(spawn);
    await worker.runUntil(async () => {
      send({ ready: true });
      for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
        if (line.trim() === '') continue;
        const { steps, exit } = JSON.parse(line) as { steps?: number; exit?: boolean };
        if (exit) return;
        if (!Number.isInteger(steps) || steps! < 1) throw new Error(`bad request: ${line}`);
        const run = await toolLoop(service, temporal.client, {
          provider: spawn.name,
          calls: steps!,
          cwd: option('dir'),
        });
        send({
          steps,
          wall_ms: Math.round(run.ms * 10) / 10,
          history_bytes: run.bytes,
          model_calls: await modelCalls(temporal.client, run.id),
        });
      }
    });
  } finally {
    await temporal.close();
  }
}

function missing(name: string): never {
  throw new Error(`missing --${name}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    send({ error: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
