// The commands that host: `dev` (the embedded server and a worker) and `worker` (a worker for the
// configured server). Loaded only for them, since they load the Temporal worker.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { providersFromEnv } from '../providers/from-env';
import { connectTemporal } from '../worker/connect';
import { createSubagentWorker } from '../worker/worker';
import { EXIT, Flags, out, wholeNumberOption } from './common';

const MAX_PORT = 65_535;

/** The embedded server on `.data/temporal.db` and a worker for SUBAGENT_PROVIDERS, until SIGINT or SIGTERM. */
export async function dev(flags: Flags): Promise<number> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const port = wholeNumberOption(flags, 'port', 1, MAX_PORT) ?? 7233;
  const uiPort = wholeNumberOption(flags, 'ui-port', 1, MAX_PORT);
  const temporal = await connectTemporal({
    embedded: true,
    devServer: { port, ...(uiPort === undefined ? {} : { uiPort }) },
  });
  const server = temporal.devServer!;
  const subagentWorker = await createSubagentWorker({
    connection: temporal.connection,
    namespace: temporal.namespace,
    providers: providersFromEnv(process.env, 'scripted,spawn,fork'),
    ...(temporal.dataConverter ? { dataConverter: temporal.dataConverter } : {}),
  });
  out(
    flags,
    `Temporal dev server on ${server.address}${server.uiUrl ? `, Web UI ${server.uiUrl}` : ''}; worker polling ${subagentWorker.taskQueues.join(', ')}. Ctrl-C stops both.`,
    { address: server.address, uiUrl: server.uiUrl, taskQueues: subagentWorker.taskQueues },
  );
  try {
    await subagentWorker.run(); // until SIGINT or SIGTERM
  } finally {
    await temporal.close();
  }
  return EXIT.ok;
}

/** The standalone worker process (worker/main.ts) owns the process from here. */
export async function worker(): Promise<number> {
  await import('../worker/main');
  return new Promise<number>(() => undefined);
}
