// A multi-service Temporal cluster on PostgreSQL, on one machine: the production topology, for
// tests that need faults only a cluster has and for `npm run cluster`. The Temporal server and its
// SQL tool are built from the Go module proxy (pinned, cached under .tools/); frontend, history
// (one host or more), matching and worker run as processes of their own on loopback, with stock
// dynamic configuration, on a PostgreSQL server of the cluster's own under its directory.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { SERVER_SETTINGS, freePortBelowEphemeral } from '../temporal/dev-server';
import { ensureSearchAttributes } from '../temporal/search-attributes';
import { type PostgresServer, startPostgres } from './postgres';

/** The Temporal server release the cluster runs; docker-compose.yml pins the same. */
export const TEMPORAL_SERVER_VERSION = '1.29.1';
const MODULE = 'go.temporal.io/server';
/** History shards of the cluster; docker-compose.yml sets the same. */
export const CLUSTER_HISTORY_SHARDS = 4;
/** Starts again a service that exited while the cluster came up, at most this many times. */
const MAX_START_RETRIES = 2;

export interface ClusterBinaries {
  server: string;
  sqlTool: string;
  /** The PostgreSQL schema directories of this server release. */
  schema: { temporal: string; visibility: string };
}

/**
 * The pinned server and SQL tool, built with `go install` into `.tools/temporal-server-<version>`
 * on first use (about 10 minutes on two cores with a cold module cache) and reused after.
 */
export function clusterBinaries(root = process.cwd(), log: (line: string) => void = () => undefined): ClusterBinaries {
  const bin = resolve(root, '.tools', `temporal-server-${TEMPORAL_SERVER_VERSION}`);
  const server = join(bin, 'server');
  const sqlTool = join(bin, 'sql');
  if (!existsSync(server) || !existsSync(sqlTool)) {
    log(
      `building the Temporal server ${TEMPORAL_SERVER_VERSION} and its SQL tool from the Go module proxy into ${bin}`,
    );
    mkdirSync(bin, { recursive: true });
    execFileSync(
      'go',
      [
        'install',
        `${MODULE}/cmd/server@v${TEMPORAL_SERVER_VERSION}`,
        `${MODULE}/cmd/tools/sql@v${TEMPORAL_SERVER_VERSION}`,
      ],
      { env: { ...process.env, GOBIN: bin, GOFLAGS: '-mod=mod' }, stdio: ['ignore', 'inherit', 'inherit'] },
    );
  }
  const modules = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();
  const schemas = join(modules, `${MODULE}@v${TEMPORAL_SERVER_VERSION}`, 'schema', 'postgresql', 'v12');
  if (!existsSync(schemas)) {
    // The binaries are cached but the module source is not (a cleaned module cache): fetch it.
    execFileSync('go', ['mod', 'download', `${MODULE}@v${TEMPORAL_SERVER_VERSION}`], {
      cwd: bin,
      env: { ...process.env, GOFLAGS: '-mod=mod' },
      stdio: 'ignore',
    });
  }
  return {
    server,
    sqlTool,
    schema: { temporal: join(schemas, 'temporal', 'versioned'), visibility: join(schemas, 'visibility', 'versioned') },
  };
}

export type ClusterServiceName = 'frontend' | 'history' | 'matching' | 'worker';

/** One service process of the cluster. */
export interface ClusterService {
  /** `frontend`, `matching`, `worker`, `history-1`, `history-2`... */
  readonly instance: string;
  readonly service: ClusterServiceName;
  pid(): number | undefined;
  /** Starts it (again) with the same configuration and ports. */
  start(): Promise<void>;
  /** Stops it: SIGTERM (a clean shutdown) unless `signal` says otherwise (SIGKILL: a crash). */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface TemporalCluster {
  /** The frontend, for clients and workers. */
  readonly address: string;
  readonly namespace: string;
  readonly dir: string;
  readonly postgres: PostgresServer;
  readonly services: readonly ClusterService[];
  /** The service process named `instance`. */
  service(instance: string): ClusterService;
  /** Stops every service, then PostgreSQL. */
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Where the cluster keeps PostgreSQL's data, its configuration and logs. */
  dir: string;
  /** History hosts, each a process of its own; the shards move between them. Default 1. */
  historyHosts?: number;
  /** Processes outlive this one (`npm run cluster -- start`). */
  detached?: boolean;
  binaries?: ClusterBinaries;
  log?: (line: string) => void;
}

interface InstancePorts {
  grpc: number;
  membership: number;
  http?: number;
}

/**
 * Starts PostgreSQL, creates both schemas with the SQL tool, writes a configuration per service
 * process (the ports of each, all on 127.0.0.1) and starts them; resolves once the frontend serves
 * the `default` namespace with the runs' search attributes. The caller stops it.
 */
export async function startCluster(options: ClusterOptions): Promise<TemporalCluster> {
  const log = options.log ?? (() => undefined);
  const dir = resolve(options.dir);
  const binaries = options.binaries ?? clusterBinaries(process.cwd(), log);
  mkdirSync(join(dir, 'config'), { recursive: true });
  mkdirSync(join(dir, 'logs'), { recursive: true });
  // PostgreSQL runs as its own user when this is root: it must reach its directory below this one.
  chmodSync(dir, 0o755);

  // A cluster started again on its directory keeps its ports: its database remembers its hosts by them.
  const portsFile = join(dir, 'ports.json');
  const kept = existsSync(portsFile)
    ? (JSON.parse(readFileSync(portsFile, 'utf8')) as { postgres: number; instances: Record<string, InstancePorts> })
    : undefined;
  const postgres = await startPostgres({
    dir: join(dir, 'postgres'),
    detached: options.detached ?? false,
    ...(kept ? { port: kept.postgres } : {}),
  });
  for (const [database, schema] of [
    ['temporal', binaries.schema.temporal],
    ['temporal_visibility', binaries.schema.visibility],
  ] as const) {
    const sql = (...args: string[]) =>
      execFileSync(
        binaries.sqlTool,
        [
          '--plugin',
          'postgres12',
          '--ep',
          '127.0.0.1',
          '-p',
          String(postgres.port),
          '-u',
          'postgres',
          '--db',
          database,
          ...args,
        ],
        { stdio: 'ignore' },
      );
    // A cluster started again on its data has both already: those two may fail (-q), the update not.
    sql('-q', 'create-database');
    sql('-q', 'setup-schema', '-v', '0.0');
    sql('update-schema', '-d', schema);
  }

  const instances: [string, ClusterServiceName][] = [
    ['frontend', 'frontend'],
    ...Array.from({ length: options.historyHosts ?? 1 }, (_, i): [string, ClusterServiceName] => [
      `history-${i + 1}`,
      'history',
    ]),
    ['matching', 'matching'],
    ['worker', 'worker'],
  ];
  const distinct = distinctPorts([postgres.port]);
  const ports = new Map<string, InstancePorts>();
  for (const [instance, service] of instances) {
    ports.set(
      instance,
      kept?.instances[instance] ?? {
        grpc: await distinct(freePortBelowEphemeral),
        membership: await distinct(freePortBelowEphemeral),
        ...(service === 'frontend' ? { http: await distinct(freePortBelowEphemeral) } : {}),
      },
    );
  }
  writeFileSync(portsFile, JSON.stringify({ postgres: postgres.port, instances: Object.fromEntries(ports) }, null, 2));
  const dynamicConfig = resolve(dir, 'config', 'dynamic-config.yaml');
  writeFileSync(dynamicConfig, dynamicConfigYaml(SERVER_SETTINGS));
  const frontend = ports.get('frontend')!;
  for (const [instance, service] of instances) {
    writeFileSync(
      join(dir, 'config', `${instance}.yaml`),
      serverConfig(postgres.port, service, ports.get(instance)!, ports, frontend.grpc, dynamicConfig),
    );
  }

  const services = instances.map(([instance, service]) =>
    serviceProcess(binaries.server, dir, instance, service, options.detached ?? false),
  );
  const address = `127.0.0.1:${frontend.grpc}`;
  const cluster: TemporalCluster = {
    address,
    namespace: 'default',
    dir,
    postgres,
    services,
    service(instance) {
      const found = services.find((candidate) => candidate.instance === instance);
      if (!found) {
        throw new Error(`no service ${instance} (the cluster runs ${services.map((s) => s.instance).join(', ')})`);
      }
      return found;
    },
    async stop() {
      await Promise.all(services.map((service) => service.stop()));
      await postgres.stop();
    },
  };
  try {
    for (const service of services) await service.start();
    await Promise.all(services.map((service) => serving(service, ports.get(service.instance)!.membership, dir, log)));
    await registerNamespace(address, 'default', async () => {
      const dead = services.find((service) => service.pid() === undefined);
      if (dead) throw new Error(`the ${dead.instance} service exited (see ${logOf(dir, dead.instance)})`);
    });
    log(`cluster serving on ${address} (PostgreSQL on 127.0.0.1:${postgres.port}; logs in ${join(dir, 'logs')})`);
    return cluster;
  } catch (err) {
    await cluster.stop();
    throw err;
  }
}

/**
 * Resolves once `service` takes connections on its membership port (every service has one; the
 * worker service serves no gRPC): it has then read or written the cluster's metadata. On a new
 * database the services race to write it and the losers exit; started again, they find it
 * written. One that keeps exiting (a port taken, a bad configuration) fails.
 */
async function serving(
  service: ClusterService,
  membershipPort: number,
  dir: string,
  log: (line: string) => void,
): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (let restarts = 0; ;) {
    if (Date.now() > deadline) {
      throw new Error(`the ${service.instance} service did not come up (see ${logOf(dir, service.instance)})`);
    }
    if (service.pid() === undefined) {
      if (restarts === MAX_START_RETRIES) {
        throw new Error(`the ${service.instance} service exited (see ${logOf(dir, service.instance)})`);
      }
      restarts += 1;
      log(`the ${service.instance} service exited while the cluster started; starting it again`);
      await service.start();
    }
    if (await accepts(membershipPort)) return;
    await new Promise((resolveWait) => setTimeout(resolveWait, 100));
  }
}

/** Whether something on 127.0.0.1 accepts a connection on `port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolveAccepts) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolveAccepts(true);
    });
    socket.once('error', () => resolveAccepts(false));
  });
}

function logOf(dir: string, instance: string): string {
  return join(dir, 'logs', `${instance}.log`);
}

/**
 * A picker of ports that never returns one twice (nor one of `taken`): a free port the kernel
 * hands out again just after the last pick closed it is asked for anew.
 */
export function distinctPorts(taken: Iterable<number> = []): (pick: () => Promise<number>) => Promise<number> {
  const used = new Set(taken);
  return async (pick) => {
    for (;;) {
      const port = await pick();
      if (used.has(port)) continue;
      used.add(port);
      return port;
    }
  };
}

/** The server configuration of one service process: its own ports, everyone's database. */
function serverConfig(
  postgresPort: number,
  service: ClusterServiceName,
  own: InstancePorts,
  all: Map<string, InstancePorts>,
  frontendPort: number,
  dynamicConfig: string,
): string {
  const datastore = (database: string, maxConns: number) => `
      sql:
        pluginName: "postgres12"
        databaseName: "${database}"
        connectAddr: "127.0.0.1:${postgresPort}"
        connectProtocol: "tcp"
        user: "postgres"
        password: ""
        maxConns: ${maxConns}
        maxIdleConns: ${maxConns}
        maxConnLifetime: "1h"`;
  // Each process serves only its own service; the others' ports are there because the server
  // reads every section. History hosts other than this one are found through the database.
  const section = (name: ClusterServiceName, ports: InstancePorts) => `
  ${name}:
    rpc:
      grpcPort: ${ports.grpc}
      membershipPort: ${ports.membership}
      bindOnLocalHost: true${ports.http ? `\n      httpPort: ${ports.http}` : ''}`;
  const portsOf = (name: ClusterServiceName) =>
    name === service ? own : [...all.entries()].find(([instance]) => instance.split('-')[0] === name)![1];
  // Dynamic configuration: the server's defaults but for the project's settings (SERVER_SETTINGS).
  return `# Written by the cluster launcher (src/testing/cluster.ts) for the ${service} service.
dynamicConfigClient:
  filepath: "${dynamicConfig}"
  pollInterval: "60s"

log:
  stdout: true
  level: warn

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: ${CLUSTER_HISTORY_SHARDS}
  datastores:
    postgres-default:${datastore('temporal', 20)}
    postgres-visibility:${datastore('temporal_visibility', 10)}

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"

services:${(['frontend', 'history', 'matching', 'worker'] as const).map((name) => section(name, portsOf(name))).join('')}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:${frontendPort}"

dcRedirectionPolicy:
  policy: "noop"
`;
}

function serviceProcess(
  server: string,
  dir: string,
  instance: string,
  service: ClusterServiceName,
  detached: boolean,
): ClusterService {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const pidFile = join(dir, 'logs', `${instance}.pid`);
  return {
    instance,
    service,
    pid: () => (child && child.exitCode === null && child.signalCode === null ? child.pid : undefined),
    async start() {
      const log = openSync(logOf(dir, instance), 'a');
      child = spawn(
        server,
        ['--root', dir, '--config', 'config', '--env', instance, '--allow-no-auth', 'start', '--service', service],
        { stdio: ['ignore', log, log], detached },
      );
      if (detached) child.unref();
      const running = child;
      exited = new Promise<void>((done) => running.once('exit', () => done()));
      writeFileSync(pidFile, String(child.pid));
    },
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      const pid = child?.pid ?? (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : undefined);
      if (pid === undefined) return;
      try {
        process.kill(pid, signal);
      } catch {
        return;
      }
      if (child) {
        // A detached child does not keep this process alive: waiting on it must, or Node exits here.
        child.ref();
        await exited;
      }
    },
  };
}

/**
 * Registers `namespace` (retrying while the services find each other) and the runs' search
 * attributes; `check` throws to give up early.
 */
async function registerNamespace(address: string, namespace: string, check: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    await check();
    let connection: Connection | undefined;
    try {
      connection = await Connection.connect({ address, connectTimeout: 2000 });
      try {
        await connection.workflowService.registerNamespace({
          namespace,
          workflowExecutionRetentionPeriod: msToTs('24 hours'),
        });
      } catch (err) {
        if (!/already exists|AlreadyExists/i.test((err as Error).message)) throw err;
      }
      await connection.workflowService.describeNamespace({ namespace });
      await ensureSearchAttributes(connection, namespace);
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`the cluster at ${address} did not serve ${namespace}`, { cause: err });
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      await connection?.close();
    }
  }
}

/** A dynamic configuration file setting each key to one value for every namespace and task queue. */
export function dynamicConfigYaml(settings: Readonly<Record<string, unknown>>): string {
  return Object.entries(settings)
    .map(([key, value]) => `${key}:\n  - value: ${JSON.stringify(value)}\n`)
    .join('');
}
