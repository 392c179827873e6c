// Benchmark peer: the same tool loop as our bench, on Temporal's own AI SDK integration
// (@temporalio/ai-sdk 1.23.0), so both can be measured on one server against one fake model.
// It is its own npm package (bench/peer) because the integration pins @temporalio/* 1.23.0 and ai 7.
//
// Protocol, JSON lines, one long-lived process:
//   node --import tsx bench/peer/run.ts --address HOST:PORT --namespace NS --base-url URL/v1 --model ID --dir DIR
//   stdout: {"ready":true} once the worker on task queue `bench.peer` runs.
//   stdin {"steps":N}: runs one workflow (eager start) and answers
//     {"steps":N,"wall_ms":..,"history_bytes":..,"history_events":..,"model_calls":..}
//   stdin EOF or {"exit":true}: shuts the worker down and exits 0.
//   any error: {"error":"message"} and exit 1. Nothing else goes to stdout; logs go to stderr.
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { AiSdkPlugin } from '@temporalio/ai-sdk';
import { Client } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { createPeerActivities } from './activities';
import type { peerAgent } from './workflows';

const TASK_QUEUE = 'bench.peer';

interface Options {
  address: string;
  namespace: string;
  baseURL: string;
  model: string;
  dir: string;
}

// Protocol lines use the real stdout; anything else that writes there (console.log from a library
// or from workflow code) is sent to stderr so the protocol stream stays clean.
const stdout = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr) as typeof process.stdout.write;

function send(line: object): void {
  stdout(`${JSON.stringify(line)}\n`);
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      address: { type: 'string' },
      namespace: { type: 'string', default: 'default' },
      'base-url': { type: 'string' },
      model: { type: 'string' },
      dir: { type: 'string' },
    },
  });
  const missing = ['address', 'base-url', 'model', 'dir'].filter((name) => !values[name as keyof typeof values]);
  if (missing.length > 0) {
    throw new Error(`missing --${missing.join(', --')}`);
  }
  return {
    address: values.address!,
    namespace: values.namespace!,
    baseURL: values['base-url']!,
    model: values.model!,
    dir: values.dir!,
  };
}

async function createWorker(connection: NativeConnection, options: Options): Promise<Worker> {
  const modelProvider = createOpenAICompatible({ name: 'fake', baseURL: options.baseURL, apiKey: 'fake' });
  return await Worker.create({
    connection,
    namespace: options.namespace,
    taskQueue: TASK_QUEUE,
    // The plugin registers the model activities and adds the Web API polyfills to the bundle.
    plugins: [new AiSdkPlugin({ modelProvider })],
    workflowsPath: require.resolve('./workflows'),
    activities: createPeerActivities(options.dir),
    // The same settings as our own bench's workers; the rest are SDK defaults.
    maxHeartbeatThrottleInterval: 1000,
    defaultHeartbeatThrottleInterval: 1000,
    stickyQueueScheduleToStartTimeout: 1000,
  });
}

/** Runs one agent workflow and measures it, from just before the start to its result. */
async function runOnce(client: Client, options: Options, steps: number): Promise<object> {
  const started = performance.now();
  const handle = await client.workflow.start<typeof peerAgent>('peerAgent', {
    taskQueue: TASK_QUEUE,
    workflowId: `peer-${randomUUID()}`,
    args: [{ steps, model: options.model }],
    requestEagerStart: true,
  });
  const modelCalls = await handle.result();
  const wallMs = performance.now() - started;
  const info = (await handle.describe()).raw.workflowExecutionInfo;
  return {
    steps,
    wall_ms: Math.round(wallMs * 10) / 10,
    history_bytes: Number(info?.historySizeBytes ?? 0),
    history_events: Number(info?.historyLength ?? 0),
    model_calls: modelCalls,
  };
}

/** Answers stdin's requests one at a time until EOF or {"exit":true}. */
async function serve(client: Client, options: Options): Promise<void> {
  send({ ready: true });
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === '') {
      continue;
    }
    const request = JSON.parse(line) as { steps?: unknown; exit?: unknown };
    if (request.exit === true) {
      return;
    }
    if (typeof request.steps !== 'number' || !Number.isInteger(request.steps) || request.steps < 1) {
      throw new Error(`bad request: ${line}`);
    }
    send(await runOnce(client, options, request.steps));
  }
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const options = parseOptions();
  const connection = await NativeConnection.connect({ address: options.address });
  try {
    // A client on the worker's own NativeConnection may hand the first workflow task to the worker directly.
    const client = new Client({ connection, namespace: options.namespace });
    const worker = await createWorker(connection, options);
    await worker.runUntil(() => serve(client, options));
  } finally {
    await connection.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    send({ error: err instanceof Error ? err.message : String(err) });
    process.exit(1);
  },
);
