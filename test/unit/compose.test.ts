// The deployment files (docker-compose.yml, Dockerfile, .dockerignore) checked without a Docker
// engine: the compose file is parsed as YAML and its services inspected.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import {
  CLUSTER_HISTORY_SHARDS,
  TEMPORAL_SERVER_VERSION,
  distinctPorts,
  dynamicConfigYaml,
} from '../../src/testing/cluster';
import { SERVER_SETTINGS } from '../../src/temporal/dev-server';

const ROOT = join(__dirname, '..', '..');
const COMPOSE_PATH = join(ROOT, 'docker-compose.yml');
const composeText = readFileSync(COMPOSE_PATH, 'utf8');
const dockerfileText = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const dockerignoreText = readFileSync(join(ROOT, '.dockerignore'), 'utf8');

interface PortObject {
  target?: number | string;
  published?: number | string;
  host_ip?: string;
  protocol?: string;
}

interface ComposeService {
  image?: string;
  build?: unknown;
  depends_on?: string[] | Record<string, { condition?: string } | null>;
  ports?: Array<string | number | PortObject>;
  environment?: string[] | Record<string, string | number | boolean | null>;
  healthcheck?: { test?: unknown; disable?: boolean };
  volumes?: string[];
  network_mode?: string;
}

interface ComposeFile {
  version?: unknown;
  services: Record<string, ComposeService>;
}

const compose = parse(composeText) as ComposeFile;
const services = compose.services;

/** Services built from this repository rather than pulled from a registry. */
const BUILT_SERVICES = new Set(['worker']);

// ---- helpers ------------------------------------------------------------------------------------

/** `repo[:tag][@digest]` -> its tag and digest; a registry port (`host:5000/x`) is not a tag. */
function splitImageRef(ref: string): { tag?: string; digest?: string } {
  const [nameAndTag, digest] = ref.split('@', 2);
  const lastSlash = nameAndTag.lastIndexOf('/');
  const colon = nameAndTag.indexOf(':', lastSlash + 1);
  return { tag: colon === -1 ? undefined : nameAndTag.slice(colon + 1), digest };
}

/** An image is pinned by a digest, or by an explicit tag that is not `latest`. */
function isPinnedImage(ref: string): boolean {
  if (ref.includes('$')) return false; // the tag would depend on the environment
  const { tag, digest } = splitImageRef(ref);
  if (digest) return /^sha256:[0-9a-f]{64}$/.test(digest);
  return tag !== undefined && tag !== '' && tag !== 'latest';
}

/** For compose images: pinned to a release (`16.4`, `1.29.1`), not a moving major line (`16`). */
function isPinnedToRelease(ref: string): boolean {
  if (!isPinnedImage(ref)) return false;
  const { tag, digest } = splitImageRef(ref);
  return Boolean(digest) || /^v?\d+\.\d+/.test(tag!);
}

function dependencies(service: ComposeService): Record<string, string> {
  const deps = service.depends_on ?? [];
  if (Array.isArray(deps)) return Object.fromEntries(deps.map((name) => [name, 'service_started']));
  return Object.fromEntries(Object.entries(deps).map(([name, spec]) => [name, spec?.condition ?? 'service_started']));
}

function environment(service: ComposeService): Record<string, string | null> {
  const env = service.environment ?? {};
  if (Array.isArray(env)) {
    return Object.fromEntries(
      env.map((entry) => {
        const eq = entry.indexOf('=');
        return eq === -1 ? [entry, null] : [entry.slice(0, eq), entry.slice(eq + 1)];
      }),
    );
  }
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === null ? null : String(v)]));
}

/** The host address a published port binds to; undefined means every interface. */
function hostIpOf(port: string | number | PortObject): string | undefined {
  if (typeof port === 'number') return undefined;
  if (typeof port === 'object') return port.host_ip;
  const spec = port.split('/')[0];
  if (spec.startsWith('[')) return spec.slice(1, spec.indexOf(']')); // [::1]:8080:8080
  const parts = spec.split(':');
  return parts.length === 3 ? parts[0] : undefined;
}

/** A compose interpolation of the named variable whose fallback, if any, is empty or an error. */
function isPassThrough(name: string, value: string | null): boolean {
  if (value === null) return true; // `- NAME` in list form: taken from the host as is
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^\\$\\{${escaped}(?:|:?-|:?\\?[^}]*)\\}$`).test(value);
}

interface DockerfileStage {
  from: string;
  name?: string;
  instructions: Array<{ keyword: string; args: string }>;
}

/** Splits a Dockerfile into stages; joins continuation lines and drops comments. */
function parseDockerfile(text: string): DockerfileStage[] {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue; // Docker skips these inside continuations too
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1).trimEnd() + ' ';
      continue;
    }
    logical.push((pending + line).trim());
    pending = '';
  }
  if (pending.trim()) logical.push(pending.trim());

  const stages: DockerfileStage[] = [];
  for (const line of logical) {
    if (!line) continue;
    const match = /^(\S+)\s*(.*)$/.exec(line)!;
    const keyword = match[1].toUpperCase();
    const args = match[2];
    if (keyword === 'FROM') {
      const words = args.split(/\s+/).filter((w) => !w.startsWith('--'));
      const asIndex = words.findIndex((w) => w.toUpperCase() === 'AS');
      stages.push({ from: words[0], name: asIndex === -1 ? undefined : words[asIndex + 1], instructions: [] });
    } else if (stages.length > 0) {
      stages[stages.length - 1].instructions.push({ keyword, args });
    }
  }
  return stages;
}

// ---- docker-compose.yml -------------------------------------------------------------------------

describe('docker-compose.yml', () => {
  it('follows the compose spec without the obsolete top-level version key', () => {
    expect(compose).toHaveProperty('services');
    expect(compose.version).toBeUndefined();
  });

  it('defines the postgresql, temporal, temporal-ui and worker services', () => {
    expect(Object.keys(services)).toEqual(expect.arrayContaining(['postgresql', 'temporal', 'temporal-ui', 'worker']));
  });

  it('pins every pulled image to a release tag or digest, never latest', () => {
    const pulled = Object.entries(services).filter(([name]) => !BUILT_SERVICES.has(name));
    expect(pulled.length).toBeGreaterThan(0);
    for (const [name, service] of pulled) {
      expect({ service: name, image: service.image }).toEqual({ service: name, image: expect.any(String) });
      expect({ service: name, image: service.image, pinned: isPinnedToRelease(service.image!) }).toEqual({
        service: name,
        image: service.image,
        pinned: true,
      });
    }
  });

  it('builds the worker from this repository instead of pulling an image', () => {
    expect(services.worker.build).toBeDefined();
  });

  it('recognises unpinned and pinned image references', () => {
    expect(isPinnedToRelease('postgres')).toBe(false);
    expect(isPinnedToRelease('postgres:latest')).toBe(false);
    expect(isPinnedToRelease('postgres:16')).toBe(false);
    expect(isPinnedToRelease('registry.local:5000/postgres')).toBe(false);
    expect(isPinnedToRelease('temporalio/ui:${UI_TAG}')).toBe(false);
    expect(isPinnedToRelease('postgres:16.4')).toBe(true);
    expect(isPinnedToRelease('registry.local:5000/temporalio/auto-setup:1.29.1')).toBe(true);
    expect(isPinnedToRelease(`postgres@sha256:${'a'.repeat(64)}`)).toBe(true);
  });

  it('starts the worker after temporal, and temporal only once postgresql is healthy', () => {
    expect(dependencies(services.worker)).toHaveProperty('temporal');
    expect(dependencies(services.temporal)).toMatchObject({ postgresql: 'service_healthy' });
  });

  it('gives every service that others wait on as healthy a healthcheck', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [dependency, condition] of Object.entries(dependencies(service))) {
        expect({ service: name, dependency, defined: dependency in services }).toEqual({
          service: name,
          dependency,
          defined: true,
        });
        if (condition !== 'service_healthy') continue;
        const check = services[dependency].healthcheck;
        expect({ dependency, hasHealthcheck: Boolean(check?.test) && !check?.disable }).toEqual({
          dependency,
          hasHealthcheck: true,
        });
      }
    }
  });

  it('checks postgresql health with pg_isready', () => {
    expect(JSON.stringify(services.postgresql.healthcheck?.test)).toContain('pg_isready');
  });

  it('publishes every port on 127.0.0.1 only', () => {
    const published = Object.entries(services).flatMap(([name, service]) =>
      (service.ports ?? []).map((port) => ({ service: name, port, hostIp: hostIpOf(port) })),
    );
    expect(published.length).toBeGreaterThan(0);
    for (const entry of published) expect(entry).toEqual({ ...entry, hostIp: '127.0.0.1' });
  });

  it('recognises ports published on every interface', () => {
    expect(hostIpOf(7233)).toBeUndefined();
    expect(hostIpOf('7233')).toBeUndefined();
    expect(hostIpOf('7233:7233')).toBeUndefined();
    expect(hostIpOf('0.0.0.0:7233:7233/tcp')).toBe('0.0.0.0');
    expect(hostIpOf('127.0.0.1:8080:8080')).toBe('127.0.0.1');
    expect(hostIpOf('[::1]:8080:8080')).toBe('::1');
    expect(hostIpOf({ target: 8080, published: 8080 })).toBeUndefined();
  });

  it('uses no host networking, which would bypass the port bindings', () => {
    for (const [name, service] of Object.entries(services)) {
      expect({ service: name, network_mode: service.network_mode }).not.toEqual({
        service: name,
        network_mode: 'host',
      });
    }
  });

  it('runs the server release and settings the cluster tests run (npm run cluster)', () => {
    expect(services.temporal!.image).toBe(`temporalio/auto-setup:${TEMPORAL_SERVER_VERSION}`);
    expect(environment(services.temporal!)).toMatchObject({
      NUM_HISTORY_SHARDS: String(CLUSTER_HISTORY_SHARDS),
      DEFAULT_NAMESPACE_RETENTION: '24h',
    });
    // The dynamic configuration the cluster launcher writes, mounted where the variable points.
    const mounted = 'config/dynamicconfig/subagents.yaml';
    expect(environment(services.temporal!)).toMatchObject({ DYNAMIC_CONFIG_FILE_PATH: mounted });
    expect(services.temporal!.volumes).toContain(`./deploy/temporal-dynamic-config.yaml:/etc/temporal/${mounted}:ro`);
    const file = parse(readFileSync(join(ROOT, 'deploy', 'temporal-dynamic-config.yaml'), 'utf8')) as unknown;
    expect(file).toEqual(parse(dynamicConfigYaml(SERVER_SETTINGS)));
  });

  it('points the worker at the temporal service and the default namespace', () => {
    expect(environment(services.worker)).toMatchObject({
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'default',
    });
  });

  it('passes the model settings and the encryption keys through from the host environment instead of writing them down', () => {
    const env = environment(services.worker);
    for (const name of ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'SUBAGENT_MODEL', 'SUBAGENT_ENCRYPTION_KEYS']) {
      expect(env).toHaveProperty([name]);
      expect({ name, value: env[name], passThrough: isPassThrough(name, env[name]) }).toEqual({
        name,
        value: env[name],
        passThrough: true,
      });
    }
  });

  it('holds no literal OPENAI_API_KEY value in any service', () => {
    for (const [name, service] of Object.entries(services)) {
      const env = environment(service);
      if (!('OPENAI_API_KEY' in env)) continue;
      expect({ service: name, passThrough: isPassThrough('OPENAI_API_KEY', env.OPENAI_API_KEY) }).toEqual({
        service: name,
        passThrough: true,
      });
    }
    expect(composeText).not.toMatch(/\bsk-[A-Za-z0-9_-]{16,}/);
  });

  it('recognises a secret written into the file, even as an interpolation fallback', () => {
    expect(isPassThrough('OPENAI_API_KEY', '${OPENAI_API_KEY:-}')).toBe(true);
    expect(isPassThrough('OPENAI_API_KEY', '${OPENAI_API_KEY}')).toBe(true);
    expect(isPassThrough('OPENAI_API_KEY', '${OPENAI_API_KEY:?set OPENAI_API_KEY}')).toBe(true);
    expect(isPassThrough('OPENAI_API_KEY', null)).toBe(true);
    expect(isPassThrough('OPENAI_API_KEY', 'sk-live-0123456789abcdef')).toBe(false);
    expect(isPassThrough('OPENAI_API_KEY', '${OPENAI_API_KEY:-sk-live-0123456789abcdef}')).toBe(false);
    expect(isPassThrough('OPENAI_API_KEY', '${OTHER_KEY}')).toBe(false);
  });
});

// ---- Dockerfile -------------------------------------------------------------------------------

describe('Dockerfile', () => {
  const stages = parseDockerfile(dockerfileText);
  const finalStage = stages[stages.length - 1];

  it('builds in more than one stage', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
  });

  it('pins every base image to an explicit tag or digest', () => {
    const earlierStageNames = new Set<string>();
    for (const stage of stages) {
      const fromEarlierStage = earlierStageNames.has(stage.from.toLowerCase()) || stage.from === 'scratch';
      if (!fromEarlierStage) {
        expect({ from: stage.from, pinned: isPinnedImage(stage.from) }).toEqual({ from: stage.from, pinned: true });
      }
      if (stage.name) earlierStageNames.add(stage.name.toLowerCase());
    }
  });

  it('runs the final stage as a non-root user', () => {
    const users = finalStage.instructions.filter((i) => i.keyword === 'USER');
    expect(users.length).toBeGreaterThan(0);
    const user = users[users.length - 1].args.trim().split(':')[0];
    expect(['', 'root', '0']).not.toContain(user);
  });

  it('installs only production dependencies in the final stage and starts the worker entry point', () => {
    const runs = finalStage.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(runs.some((cmd) => /\bnpm ci\b.*--omit=dev/.test(cmd))).toBe(true);
    const cmd = finalStage.instructions.filter((i) => i.keyword === 'CMD').pop();
    expect(cmd && JSON.parse(cmd.args)).toEqual(['node', 'dist/src/worker/main.js']);
  });

  it("runs the worker on figure 6's allocator, jemalloc, installed in the final stage", () => {
    const envs = finalStage.instructions.filter((i) => i.keyword === 'ENV').map((i) => i.args);
    const runs = finalStage.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
    expect(envs).toContain('LD_PRELOAD=/usr/local/lib/libjemalloc.so.2');
    const install = runs.find((cmd) => /\bapt-get install\b.*\blibjemalloc2\b/.test(cmd));
    expect(install).toMatch(/\bln -s\b.*\/usr\/local\/lib\/libjemalloc\.so\.2\b/);
  });

  it('parses stages, continuation lines and comments', () => {
    const parsed = parseDockerfile(
      [
        '# comment',
        'FROM --platform=linux/amd64 node:20-bookworm-slim AS build',
        'RUN npm ci \\',
        '    --omit=dev',
        'FROM build',
        'USER node:node',
      ].join('\n'),
    );
    expect(parsed).toEqual([
      { from: 'node:20-bookworm-slim', name: 'build', instructions: [{ keyword: 'RUN', args: 'npm ci --omit=dev' }] },
      { from: 'build', name: undefined, instructions: [{ keyword: 'USER', args: 'node:node' }] },
    ]);
  });
});

// ---- .dockerignore ------------------------------------------------------------------------------

describe('.dockerignore', () => {
  it('leaves dependencies, build output, local state and git history out of the build context', () => {
    const patterns = dockerignoreText
      .split(/\r?\n/)
      .map((line) => line.trim())
      .filter((line) => line && !line.startsWith('#'));
    expect(patterns).toEqual(expect.arrayContaining(['node_modules', 'dist', '.data', '.tools', '.git', 'coverage']));
  });
});

describe("the cluster's ports", () => {
  it('are picked once each, however often the kernel hands one out again', async () => {
    const handedOut = [40000, 40000, 5432, 40001, 40000, 40002];
    const pick = distinctPorts([5432]);
    const next = async () => handedOut.shift()!;
    expect([await pick(next), await pick(next), await pick(next)]).toEqual([40000, 40001, 40002]);
  });
});
